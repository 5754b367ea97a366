// Launchers of the CUDA kernels (defined in the .cu files beside this one). Each launches on the
// given stream and checks the launch (SSD_CUDA_LAUNCHED); none synchronises. Pointers are device
// pointers; shapes as in runtime/backend/backend.h. The arithmetic of every kernel is a
// kernels/common function with a CPU twin test in tests/unit/device_math.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include "runtime/core/dtype.h"

namespace ssd::cuda {

// out[r, c] = bf16(decode(row r of `data`, value c)).   out: [rows, cols] BF16 bit patterns.
void launch_dequant_to_bf16(DType type, const uint8_t* data, uint64_t row_bytes, int64_t rows,
                            int64_t cols, uint16_t* out, cudaStream_t s);
// out[i, :] = decode(row tokens[i] of the table).   out: [n, cols]
void launch_embed(DType type, const uint8_t* table, uint64_t row_bytes, int64_t cols,
                  const int32_t* tokens, int64_t n, float* out, cudaStream_t s);
void launch_rmsnorm(const float* x, const float* g, float* y, int64_t rows, int64_t dim,
                    float eps, cudaStream_t s);
void launch_rope(float* x, int64_t n, int64_t n_heads, int64_t head_dim, int64_t rot_dim,
                 const int32_t* positions, const float* inv_freq, bool neox, cudaStream_t s);
void launch_swiglu(const float* gate, const float* up, float* out, int64_t count, cudaStream_t s);
void launch_add(float* y, const float* x, int64_t count, cudaStream_t s);
void launch_add_bias(float* y, const float* b, int64_t rows, int64_t cols, cudaStream_t s);
void launch_f32_to_bf16(const float* x, uint16_t* y, int64_t count, cudaStream_t s);
// Writes row i of k and v (row floats each) at pool + k_off[i] and pool + k_off[i] + v_off.
void launch_store_kv(float* pool, const int64_t* k_off, int64_t v_off, const float* k,
                     const float* v, int64_t n, int64_t row, cudaStream_t s);

// Tensor-parallel exchanges finished on the device (exchange.cu; kernels/common/
// exchange_math.h). out[i] = gathered[0][i] + gathered[1][i] + ... in rank order.
//   gathered: [ranks, count]
void launch_rank_order_sum(const float* gathered, int ranks, int64_t count, float* out,
                           cudaStream_t s);
// out [rows, width] from rank-major blocks (rank r's [rows, off[r+1] - off[r]] at rows * off[r]).
//   off: [ranks + 1] device memory, width = off[ranks]
void launch_stitch_columns(const float* gathered, const int64_t* off, int ranks, int64_t rows,
                           int64_t width, float* out, cudaStream_t s);

// y[t, r] = sum_c W[r, c] x[t, c], W [rows, cols] in its stored `type` (rows row_bytes apart,
// decoded in the kernel), FP32 accumulation in a fixed order per output (one warp per (t, r),
// kernels/common/invariant_dot.h): the result of row t does not depend on n.
void launch_matmul_invariant(DType type, const uint8_t* w, uint64_t row_bytes, const float* x,
                             float* y, int64_t n, int64_t rows, int64_t cols, cudaStream_t s);

// One query's view of the paged KV cache (AttentionCall flattened for the device).
struct QueryDesc {
  int64_t page_table = 0;  // offset of its sequence's page table in the call's table array
  int64_t prefix = 0;      // positions [0, prefix) visible
  int64_t visible = 0;     // offset of its visible list in the call's list array
  int64_t n_visible = 0;
};
struct PagedKv {
  const float* pool = nullptr;  // page p at pool + p * page_floats
  int64_t page_floats = 0, layer_stride = 0, v_offset = 0, row = 0, page_tokens = 0;
};
// out[i, h, :] = softmax(scale q[i, h] . K^T) V over query i's visible positions.
// head_dim <= kMaxHeadDim. Split-K over chunks of kernels::hd::kAttnChunk positions
// (softmax_math.h): max_chunks bounds any query's chunk count (from the cache's capacity, so a
// captured graph stays valid as contexts grow), partials is scratch of
// attention_partial_floats(n, n_heads, head_dim, max_chunks) floats (unused when max_chunks <= 1).
inline constexpr int64_t kMaxHeadDim = 256;
inline int64_t attention_partial_floats(int64_t n, int64_t n_heads, int64_t head_dim,
                                        int64_t max_chunks) {
  return max_chunks > 1 ? n * n_heads * max_chunks * (head_dim + 2) : 0;
}
void launch_attention(const float* q, float* out, int64_t n, int64_t n_heads, int64_t n_kv_heads,
                      int64_t head_dim, const int32_t* kv_head_of, int64_t layer, float scale,
                      const PagedKv& kv, const int32_t* page_tables, const QueryDesc* queries,
                      const int64_t* visible, int64_t max_chunks, float* partials,
                      cudaStream_t s);

// out[r] = index of the largest of logits[r, 0..vocab) (lowest index on ties, NaN skipped, -1
// when every value is NaN): ssd::argmax per row.
void launch_argmax_rows(const float* logits, int64_t rows, int32_t vocab, int32_t* out,
                        cudaStream_t s);
// u[i] = philox_uniform(seed, stream, first_step + i, lane) for i < count.
void launch_philox_uniforms(uint64_t seed, uint64_t stream, uint32_t first_step, uint32_t lane,
                            int64_t count, double* u, cudaStream_t s);
// Greedy chain verification on the device: with argmax[0..k] the target's argmax after the
// root and after each draft token, accepted = the length of the prefix of draft[0..k) equal to
// argmax[0..k); emitted = draft[0..accepted) then argmax[accepted]. out: [k + 1] emitted tokens,
// *n_emitted = accepted + 1. One thread.
void launch_verify_greedy_chain(const int32_t* draft, const int32_t* argmax, int32_t k,
                                int32_t* out, int32_t* n_emitted, cudaStream_t s);
// Sampled-mode verification of a batch of draft trees of n nodes each (verify_sampled.cu;
// kernels/common/verify_math.h's verify_tree_sampled, one thread per tree). CSR lists: tree b's
// target rows are p rows b * (n + 1) .. b * (n + 1) + n, its draft rows q rows b * n .. b * n +
// n - 1; its children lists (TreeLists::first / next) at first + b * (n + 1), next + b * n.
struct SampledTrees {
  const int32_t* p_ids = nullptr;
  const double* p_probs = nullptr;
  const int64_t* p_off = nullptr;      // [batch * (n + 1) + 1]
  const int32_t* q_ids = nullptr;
  const double* q_probs = nullptr;
  const int64_t* q_off = nullptr;      // [batch * n + 1]
  const int32_t* tokens = nullptr;     // [batch, n]
  const int32_t* first = nullptr;      // [batch, n + 1]
  const int32_t* next = nullptr;       // [batch, n]
  const uint64_t* streams = nullptr;   // [batch] each sequence's Philox stream
  const uint32_t* positions = nullptr; // [batch] output index of the first decided token
  uint64_t seed = 0;
  int32_t n = 0;
  double* mass = nullptr;              // [batch, 2 * mass_stride] scratch, stride >= longest p
  int64_t mass_stride = 0;
  // [batch, vocab] token -> entry scratch (verify_math.h's TokenIndex), every entry -1 before
  // the launch and again after it; ids of every list lie in [0, vocab).
  int32_t* index = nullptr;
  int32_t vocab = 0;
  int32_t* out = nullptr;              // [batch, n + 1] emitted tokens
  int32_t* path = nullptr;             // [batch, n] accepted nodes
  int32_t* n_emitted = nullptr;        // [batch]
  int32_t* all_accepted = nullptr;     // [batch] 0 / 1
};
void launch_verify_sampled_trees(const SampledTrees& t, int64_t batch, cudaStream_t s);
// Domino correction step for n chains (runtime/drafters/domino/domino_head.cpp), fused:
// s[j, u] = gru_unit(gi[j, u], gi[j, g+u], gi[j, 2g+u], gh[j, u], gh[j, g+u], gh[j, 2g+u], s[j, u])
// with gi = W_ih x + b_ih and gh = W_hh s + b_hh computed before (matmul + add_bias).
void launch_gru_update(const float* gi, const float* gh, float* state, int64_t n, int64_t g,
                       cudaStream_t s);
// logits[j, :] = base[j, :] + corr[j, :]; next[j] = argmax of logits row j (the Domino head's
// base add + greedy pick, one block per row).
void launch_add_argmax(const float* base, const float* corr, float* logits, int64_t n,
                       int32_t vocab, int32_t* next, cudaStream_t s);
// m[i] = silu(m[i]) (the low-rank head's activation).
void launch_silu(float* m, int64_t count, cudaStream_t s);

// The fused greedy Domino walk (domino_walk.cu; runtime/backend/domino_walk_call.h has the
// call's meaning): one block of threads per chain walks all its positions, GRU step, low-rank
// correction, base add and argmax, without returning to the host.
// A head matrix as the checkpoint stores it (the backend's device copy of the file's bytes):
// the walk decodes each element with kernels/common/dequant.h, so F32, F16, BF16 and quantised
// heads multiply their own values, as the op-by-op head's matmul does.
struct WalkMatrix {
  const uint8_t* data = nullptr;  // [rows, row_bytes] device
  DType type = DType::F32;
  uint64_t row_bytes = 0;
};
struct DominoWalkArgs {
  const uint8_t* embd = nullptr;     // [V, embd_row_bytes] the target's embedding file bytes
  DType embd_type = DType::F32;
  uint64_t embd_row_bytes = 0;
  WalkMatrix w_ih;                   // [3g, d]
  WalkMatrix w_hh;                   // [3g, g]
  WalkMatrix w1;                     // [r, d + g]
  WalkMatrix w2;                     // [Vd, r]
  const float* b_ih = nullptr;       // [3g]
  const float* b_hh = nullptr;       // [3g]
  const int32_t* vocab_ids = nullptr;  // [Vd] or null
  int64_t d = 0, g = 0, r = 0, vd = 0;
  bool use_head = true;
  float* logits = nullptr;           // [rows, Vd] base in, final out
  const float* hidden = nullptr;     // [rows, d]
  const int64_t* first = nullptr;    // [chains + 1]
  const int32_t* anchors = nullptr;  // [chains]
  int64_t chains = 0;
  float* scratch = nullptr;          // [chains, domino_walk_scratch_floats(d, g, r)]
  int32_t* tokens = nullptr;         // [rows] target ids (the step kernel: draft indices)
};
// Floats of scratch one chain needs: s [g], x [d], gi [3g], gh [3g], mid [r].
__host__ __device__ inline int64_t domino_walk_scratch_floats(int64_t d, int64_t g,
                                                              int64_t r) {
  return d + 7 * g + r;
}
void launch_domino_walk(const DominoWalkArgs& a, cudaStream_t s);
// Position i (0-based) of every chain longer than i: GRU step on the previous position's token
// (tokens[row - 1], a DRAFT index; the anchor at i = 0), then the row's correction; chains with
// greedy[c] != 0 write their argmax's draft index to tokens[row]. The sampled rows' tokens are
// drawn between launches by the caller. greedy: [chains] device.
void launch_domino_walk_step(const DominoWalkArgs& a, int64_t i, const uint8_t* greedy,
                             cudaStream_t s);

}  // namespace ssd::cuda
