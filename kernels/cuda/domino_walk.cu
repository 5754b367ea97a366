// The Domino head's greedy correction loop as ONE kernel launch for a whole batch of chains
// (runtime/backend/domino_walk_call.h says what it computes; kernels/common/domino_math.h holds
// its arithmetic, shared with the CPU head and with the CPU twin the tests compare it to), and
// the same loop one position per launch for sampled walks (domino_walk_step_kernel: the
// device sampler's process and draw kernels run between positions, in stream order, so a
// sampled walk does not return to the host either; runtime/backend/cuda/domino_sampled_walk.cpp).
//
// Mapping: one block of kThreads threads per chain; the chain's positions run in order inside
// the block, separated by __syncthreads(), so nothing returns to the host between positions.
// Per position:
//   mid   = silu(W1 [h ; s])       one warp per output row, lane_dot + xor butterfly
//   final = base + W2 mid          one warp per vocabulary row, written over the base row
//   token = argmax(final)          block reduction by argmax_better, mapped to a target id
//   s     = GRU(s, emb(token))     embedding decoded from the file bytes (dequant.h), then the
//                                  gate rows one warp each, then one thread per state unit
// Every dot product runs in the batch-invariant matmul's order (matmul.cu) over the head's
// stored values (F32, F16, BF16 or quantised, decoded per element as matmul.cu decodes them), so
// the fused walk gives the bits the CUDA backend's op-by-op head would. Per-chain scratch (state, embedding,
// gates, mid) lives in global memory, which keeps any d / g / r legal; a block only reads what
// it wrote after a barrier. The weights are re-read by every chain's block; L2 absorbs that for
// the small chain counts of drafting. Not yet run on a GPU (none on the build machine).
#include "kernels/common/dequant.h"
#include "kernels/common/domino_math.h"
#include "kernels/common/half_math.h"
#include "kernels/cuda/block_argmax.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/kernels.cuh"

namespace ssd::cuda {
namespace {

namespace hd = kernels::hd;

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / hd::kDotLanes;

// Every lane ends with the butterfly sum of the warp's partials (hd::butterfly32's order).
__device__ float warp_sum(float acc) {
  for (int o = hd::kDotLanes / 2; o > 0; o /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, o);
  return acc;
}

// y[row] = W[row] . x for rows < rows, one warp per row, W decoded from its stored type; lane 0
// hands each result to `store`.
template <class X, class Store>
__device__ void warp_rows(const WalkMatrix& w, int64_t rows, int64_t cols, X&& x, Store&& store) {
  const int lane = static_cast<int>(threadIdx.x) % hd::kDotLanes;
  for (int64_t row = threadIdx.x / hd::kDotLanes; row < rows; row += kWarps) {
    const uint8_t* wr = w.data + row * w.row_bytes;
    const DType type = w.type;
    auto wc = [wr, type](int64_t c) { return hd::dequant_elem(type, wr, c); };
    const float v = warp_sum(hd::lane_dot(wc, x, cols, lane));
    if (lane == 0) store(row, v);
  }
}

// s <- GRU(s, emb(token)) for one chain.   s: [g], x: [d], gi, gh: [3g]
__device__ void gru_step(const DominoWalkArgs& a, int32_t token, float* s, float* x, float* gi,
                         float* gh) {
  const uint8_t* erow = a.embd + static_cast<int64_t>(token) * a.embd_row_bytes;
  for (int64_t c = threadIdx.x; c < a.d; c += kThreads)
    x[c] = hd::dequant_elem(a.embd_type, erow, c);
  __syncthreads();
  auto xs = [x](int64_t c) { return x[c]; };
  auto ss = [s](int64_t c) { return s[c]; };
  warp_rows(a.w_ih, 3 * a.g, a.d, xs,
            [&](int64_t u, float v) { gi[u] = hd::domino_gate(v, a.b_ih[u]); });
  warp_rows(a.w_hh, 3 * a.g, a.g, ss,
            [&](int64_t u, float v) { gh[u] = hd::domino_gate(v, a.b_hh[u]); });
  __syncthreads();
  for (int64_t u = threadIdx.x; u < a.g; u += kThreads)
    s[u] = hd::domino_gru_state(gi, gh, a.g, u, s[u]);
  __syncthreads();
}

// Chain c's per-chain scratch (see the top).   s: [g], x: [d], gi, gh: [3g], mid: [r]
struct ChainScratch {
  float *s, *x, *gi, *gh, *mid;
};
__device__ ChainScratch chain_scratch(const DominoWalkArgs& a, int64_t c) {
  ChainScratch w;
  w.s = a.scratch + c * domino_walk_scratch_floats(a.d, a.g, a.r);
  w.x = w.s + a.g;
  w.gi = w.x + a.d;
  w.gh = w.gi + 3 * a.g;
  w.mid = w.gh + 3 * a.g;
  return w;
}

// s_0 = GRU(0, emb(anchor)) (s = 0 without the head).
__device__ void chain_start(const DominoWalkArgs& a, int32_t anchor, const ChainScratch& w) {
  for (int64_t u = threadIdx.x; u < a.g; u += kThreads) w.s[u] = 0.0f;
  __syncthreads();
  if (a.use_head) gru_step(a, anchor, w.s, w.x, w.gi, w.gh);
}

// Row `row`'s final logits, in place over its base: f += W2 silu(W1 [h ; s]) (with the head).
__device__ void correct_row(const DominoWalkArgs& a, int64_t row, const ChainScratch& w) {
  if (!a.use_head) return;
  float* f = a.logits + row * a.vd;  // [Vd] base, then final
  const float* h = a.hidden + row * a.d;
  const float* s = w.s;
  float* mid = w.mid;
  const int64_t d = a.d;
  auto in = [h, s, d](int64_t col) { return hd::domino_w1_input(h, s, d, col); };
  warp_rows(a.w1, a.r, a.d + a.g, in, [&](int64_t j, float v) { mid[j] = hd::silu(v); });
  __syncthreads();
  auto ms = [mid](int64_t col) { return mid[col]; };
  warp_rows(a.w2, a.vd, a.r, ms,
            [&](int64_t v, float corr) { f[v] = hd::domino_final(f[v], corr); });
  __syncthreads();
}

// The greedy walk: every position of chain c in one block.
__global__ void domino_walk_kernel(DominoWalkArgs a) {
  const int64_t c = blockIdx.x;
  const int64_t row0 = a.first[c], k = a.first[c + 1] - row0;
  if (k <= 0) return;  // the whole block leaves together
  const ChainScratch w = chain_scratch(a, c);
  chain_start(a, a.anchors[c], w);
  for (int64_t i = 0; i < k; ++i) {
    const int64_t row = row0 + i;
    correct_row(a, row, w);
    const int32_t token =
        hd::domino_target_id(a.vocab_ids, block_argmax<kThreads>(a.logits + row * a.vd, a.vd));
    if (threadIdx.x == 0) a.tokens[row] = token;
    if (token < 0) return;  // every logit NaN: the host reports it (the same for all threads)
    if (a.use_head && i + 1 < k) gru_step(a, token, w.s, w.x, w.gi, w.gh);
  }
}

// Position i of every chain that has one (the sampled walk: domino_walk_step_kernel's caller
// draws the sampled rows between launches). tokens holds DRAFT indices here (-1: not drawn, or
// an invalid row), read back by the next position's GRU step; greedy[c] != 0: chain c takes the
// argmax itself.
__global__ void domino_walk_step_kernel(DominoWalkArgs a, int64_t i, const uint8_t* greedy) {
  const int64_t c = blockIdx.x;
  const int64_t row0 = a.first[c], k = a.first[c + 1] - row0;
  if (i >= k) return;
  const ChainScratch w = chain_scratch(a, c);
  if (i == 0) {
    chain_start(a, a.anchors[c], w);
  } else {
    const int32_t prev = a.tokens[row0 + i - 1];  // the same value for every thread
    if (prev < 0) return;                         // the chain stopped at an invalid row
    if (a.use_head) gru_step(a, hd::domino_target_id(a.vocab_ids, prev), w.s, w.x, w.gi, w.gh);
  }
  const int64_t row = row0 + i;
  correct_row(a, row, w);
  if (greedy[c]) {
    const int32_t index = block_argmax<kThreads>(a.logits + row * a.vd, a.vd);
    if (threadIdx.x == 0) a.tokens[row] = index;
  }
}

}  // namespace

void launch_domino_walk(const DominoWalkArgs& a, cudaStream_t s) {
  if (a.chains == 0) return;
  domino_walk_kernel<<<static_cast<unsigned>(a.chains), kThreads, 0, s>>>(a);
  SSD_CUDA_LAUNCHED();
}

void launch_domino_walk_step(const DominoWalkArgs& a, int64_t i, const uint8_t* greedy,
                             cudaStream_t s) {
  if (a.chains == 0) return;
  domino_walk_step_kernel<<<static_cast<unsigned>(a.chains), kThreads, 0, s>>>(a, i, greedy);
  SSD_CUDA_LAUNCHED();
}

}  // namespace ssd::cuda
