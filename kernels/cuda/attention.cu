// Attention over the paged KV cache with the AttentionCall mask (prefix + visible list), one
// warp per (query, head), in the order kernels/common/softmax_math.h documents (and its CPU twin
// attention_query() runs): lane l holds dimensions l, l + 32, ... of q and of the accumulator; a
// score is the lanes' partial dots reduced by a butterfly; one online-softmax step per visible
// position, in the call's order. A query's result depends only on its q and the K/V it sees, so
// verification blocks, Domino blocks and Saguaro branch trees give what single decodes give.
// Positions are walked one at a time: simple and batch-invariant; a split-K (flash-decoding)
// version for long contexts would merge partial states with online_softmax_merge(). Not yet run
// on a GPU.
#include <cmath>

#include "kernels/common/softmax_math.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/kernels.cuh"

namespace ssd::cuda {
namespace {

constexpr int kWarpsPerBlock = 4;
constexpr int kPerLane = static_cast<int>(kMaxHeadDim / kernels::hd::kWarp);

__global__ void attention_kernel(const float* q, float* out, int64_t n, int64_t n_heads,
                                 int64_t n_kv_heads, int64_t head_dim, const int32_t* kv_head_of,
                                 int64_t layer, float scale, PagedKv kv,
                                 const int32_t* page_tables, const QueryDesc* queries,
                                 const int64_t* visible) {
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x % 32);
  if (warp >= n * n_heads) return;
  const int64_t i = warp / n_heads, h = warp % n_heads;
  const int64_t kvh = kv_head_of ? kv_head_of[h] : h / (n_heads / n_kv_heads);
  const QueryDesc qd = queries[i];
  const float* qh = q + warp * head_dim;
  float qr[kPerLane], acc[kPerLane];
  for (int j = 0; j < kPerLane; ++j) {
    const int64_t d = lane + 32 * j;
    qr[j] = d < head_dim ? qh[d] : 0.0f;
    acc[j] = 0.0f;
  }
  kernels::hd::OnlineSoftmax st;
  const int64_t total = qd.prefix + qd.n_visible;
  for (int64_t jpos = 0; jpos < total; ++jpos) {
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
    float alpha = 0.0f, w = 0.0f;
    kernels::hd::online_softmax_step(st, part * scale, &alpha, &w);
    for (int j = 0; j < kPerLane; ++j) {
      const int64_t d = lane + 32 * j;
      if (d < head_dim) acc[j] = acc[j] * alpha + w * v[d];
    }
  }
  float* oh = out + warp * head_dim;
  const float inv = total > 0 ? 1.0f / st.l : 0.0f;
  for (int j = 0; j < kPerLane; ++j) {
    const int64_t d = lane + 32 * j;
    if (d < head_dim) oh[d] = acc[j] * inv;
  }
}

}  // namespace

void launch_attention(const float* q, float* out, int64_t n, int64_t n_heads, int64_t n_kv_heads,
                      int64_t head_dim, const int32_t* kv_head_of, int64_t layer, float scale,
                      const PagedKv& kv, const int32_t* page_tables, const QueryDesc* queries,
                      const int64_t* visible, cudaStream_t s) {
  const int64_t warps = n * n_heads;
  if (warps == 0) return;
  const auto blocks = static_cast<unsigned>((warps + kWarpsPerBlock - 1) / kWarpsPerBlock);
  attention_kernel<<<blocks, 32 * kWarpsPerBlock, 0, s>>>(q, out, n, n_heads, n_kv_heads,
                                                          head_dim, kv_head_of, layer, scale, kv,
                                                          page_tables, queries, visible);
  SSD_CUDA_LAUNCHED();
}

}  // namespace ssd::cuda
