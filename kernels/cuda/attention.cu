// Attention over the paged KV cache with the AttentionCall mask (prefix + visible list), split
// over the positions (flash-decoding) so a long context is walked by many warps, in the order
// kernels/common/softmax_math.h documents (and its CPU twin attention_query() runs):
//   partial  one warp per (query, head, chunk of kAttnChunk positions): lane l holds dimensions
//            l, l + 32, ... of q and of the accumulator; a score is the lanes' partial dots
//            reduced by a butterfly; one online-softmax step per visible position, in the call's
//            order. A query with one chunk writes its output here (acc / l); otherwise the
//            chunk's m, l and unnormalised accumulator go to the partials scratch.
//   combine  one warp per (query, head) with two chunks or more: merges the chunks left to
//            right (online_softmax_merge) and writes acc / l.
// The chunks depend only on the query's number of visible positions, so verification blocks,
// Domino blocks and Saguaro branch trees give what single decodes give. The grid covers
// max_chunks chunks per (query, head), from the cache's capacity, not the current lengths, so a
// captured CUDA graph replays correctly as the contexts grow; warps past a query's last chunk
// return at once. Not yet run on a GPU.
#include <cmath>

#include "kernels/common/softmax_math.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/kernels.cuh"

namespace ssd::cuda {
namespace {

namespace hd = kernels::hd;
constexpr int kWarpsPerBlock = 4;
constexpr int kPerLane = static_cast<int>(kMaxHeadDim / hd::kWarp);

// Visible positions of a query (prefix, then its list).
__device__ int64_t query_total(const QueryDesc& qd) { return qd.prefix + qd.n_visible; }

// [head_dim + 2] floats of chunk c of (query, head) w: accumulator, then m, then l.
__device__ float* partial_of(float* partials, int64_t w, int64_t c, int64_t max_chunks,
                             int64_t head_dim) {
  return partials + (w * max_chunks + c) * (head_dim + 2);
}

__global__ void attention_partial_kernel(const float* q, float* out, int64_t n, int64_t n_heads,
                                         int64_t n_kv_heads, int64_t head_dim,
                                         const int32_t* kv_head_of, int64_t layer, float scale,
                                         PagedKv kv, const int32_t* page_tables,
                                         const QueryDesc* queries, const int64_t* visible,
                                         int64_t max_chunks, float* partials) {
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x % 32);
  if (warp >= n * n_heads * max_chunks) return;
  const int64_t w = warp / max_chunks, c = warp % max_chunks;  // (query, head), chunk
  const int64_t i = w / n_heads, h = w % n_heads;
  const QueryDesc qd = queries[i];
  const int64_t total = query_total(qd), chunks = hd::attention_chunks(total);
  float* oh = out + w * head_dim;
  if (total == 0) {  // nothing visible: zeros, written once
    if (c == 0)
      for (int64_t d = lane; d < head_dim; d += 32) oh[d] = 0.0f;
    return;
  }
  if (c >= chunks) return;
  const int64_t kvh = kv_head_of ? kv_head_of[h] : h / (n_heads / n_kv_heads);
  const float* qh = q + w * head_dim;
  float qr[kPerLane], acc[kPerLane];
  for (int j = 0; j < kPerLane; ++j) {
    const int64_t d = lane + 32 * j;
    qr[j] = d < head_dim ? qh[d] : 0.0f;
    acc[j] = 0.0f;
  }
  hd::OnlineSoftmax st;
  const int64_t begin = c * hd::kAttnChunk;
  const int64_t end = begin + hd::kAttnChunk < total ? begin + hd::kAttnChunk : total;
  for (int64_t jpos = begin; jpos < end; ++jpos) {
    const int64_t p = jpos < qd.prefix ? jpos : visible[qd.visible + jpos - qd.prefix];
    const int64_t page = page_tables[qd.page_table + p / kv.page_tokens];
    const float* k = kv.pool + page * kv.page_floats + layer * kv.layer_stride +
                     (p % kv.page_tokens) * kv.row + kvh * head_dim;
    const float* v = k + kv.v_offset;
    float part = 0.0f;
    for (int j = 0; j < kPerLane; ++j) {
      const int64_t d = lane + 32 * j;
      if (d < head_dim) part = part + qr[j] * k[d];
    }
    for (int o = 16; o > 0; o /= 2) part += __shfl_xor_sync(0xffffffffu, part, o);
    float alpha = 0.0f, wt = 0.0f;
    hd::online_softmax_step(st, part * scale, &alpha, &wt);
    for (int j = 0; j < kPerLane; ++j) {
      const int64_t d = lane + 32 * j;
      if (d < head_dim) acc[j] = acc[j] * alpha + wt * v[d];
    }
  }
  if (chunks == 1) {  // the whole query: its output, as the unsplit walk writes it
    const float inv = 1.0f / st.l;
    for (int j = 0; j < kPerLane; ++j) {
      const int64_t d = lane + 32 * j;
      if (d < head_dim) oh[d] = acc[j] * inv;
    }
    return;
  }
  float* part = partial_of(partials, w, c, max_chunks, head_dim);
  for (int j = 0; j < kPerLane; ++j) {
    const int64_t d = lane + 32 * j;
    if (d < head_dim) part[d] = acc[j];
  }
  if (lane == 0) {
    part[head_dim] = st.m;
    part[head_dim + 1] = st.l;
  }
}

__global__ void attention_combine_kernel(float* out, int64_t n, int64_t n_heads, int64_t head_dim,
                                         const QueryDesc* queries, int64_t max_chunks,
                                         const float* partials) {
  const int64_t w = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x % 32);
  if (w >= n * n_heads) return;
  const int64_t chunks = hd::attention_chunks(query_total(queries[w / n_heads]));
  if (chunks < 2) return;  // written by the partial kernel
  float acc[kPerLane];
  hd::OnlineSoftmax st;
  for (int64_t c = 0; c < chunks; ++c) {
    const float* part = partials + (w * max_chunks + c) * (head_dim + 2);
    hd::OnlineSoftmax sc;
    sc.m = part[head_dim];
    sc.l = part[head_dim + 1];
    float fa = 0.0f, fb = 0.0f;
    if (c > 0) st = hd::online_softmax_merge(st, sc, &fa, &fb);
    else st = sc;
    for (int j = 0; j < kPerLane; ++j) {
      const int64_t d = lane + 32 * j;
      if (d >= head_dim) continue;
      acc[j] = c == 0 ? part[d] : acc[j] * fa + part[d] * fb;
    }
  }
  float* oh = out + w * head_dim;
  const float inv = 1.0f / st.l;
  for (int j = 0; j < kPerLane; ++j) {
    const int64_t d = lane + 32 * j;
    if (d < head_dim) oh[d] = acc[j] * inv;
  }
}

unsigned blocks_for_warps(int64_t warps) {
  return static_cast<unsigned>((warps + kWarpsPerBlock - 1) / kWarpsPerBlock);
}

}  // namespace

void launch_attention(const float* q, float* out, int64_t n, int64_t n_heads, int64_t n_kv_heads,
                      int64_t head_dim, const int32_t* kv_head_of, int64_t layer, float scale,
                      const PagedKv& kv, const int32_t* page_tables, const QueryDesc* queries,
                      const int64_t* visible, int64_t max_chunks, float* partials,
                      cudaStream_t s) {
  const int64_t warps = n * n_heads;
  if (warps == 0) return;
  if (max_chunks < 1) max_chunks = 1;
  attention_partial_kernel<<<blocks_for_warps(warps * max_chunks), 32 * kWarpsPerBlock, 0, s>>>(
      q, out, n, n_heads, n_kv_heads, head_dim, kv_head_of, layer, scale, kv, page_tables,
      queries, visible, max_chunks, partials);
  SSD_CUDA_LAUNCHED();
  if (max_chunks < 2) return;
  attention_combine_kernel<<<blocks_for_warps(warps), 32 * kWarpsPerBlock, 0, s>>>(
      out, n, n_heads, head_dim, queries, max_chunks, partials);
  SSD_CUDA_LAUNCHED();
}

}  // namespace ssd::cuda
