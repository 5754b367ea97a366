// Device sampling and verification pieces: per-row argmax (greedy decoding and greedy
// verification), Philox uniforms, the greedy chain verifier, and the Domino head's fused
// "base + correction, then argmax" over a block of chains. Their rules are kernels/common/
// sampling_math.h's (twin-tested against runtime/sampling and runtime/spec) and ssd::argmax's
// (lowest index on ties, NaN never wins). Not yet run on a GPU.
#include <cmath>

#include "kernels/common/domino_math.h"
#include "kernels/common/row_math.h"
#include "kernels/common/sampling_math.h"
#include "kernels/cuda/block_argmax.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/kernels.cuh"

namespace ssd::cuda {
namespace {

constexpr int kThreads = kernels::hd::kRowThreads;

__global__ void argmax_rows_kernel(const float* logits, int32_t vocab, int32_t* out) {
  const int32_t r = block_argmax<kThreads>(logits + static_cast<int64_t>(blockIdx.x) * vocab, vocab);
  if (threadIdx.x == 0) out[blockIdx.x] = r;
}

__global__ void add_argmax_kernel(const float* base, const float* corr, float* logits,
                                  int32_t vocab, int32_t* next) {
  const int64_t off = static_cast<int64_t>(blockIdx.x) * vocab;
  for (int32_t i = static_cast<int32_t>(threadIdx.x); i < vocab; i += kThreads)
    logits[off + i] = kernels::hd::add_rn(base[off + i], corr[off + i]);
  __syncthreads();
  const int32_t r = block_argmax<kThreads>(logits + off, vocab);
  if (threadIdx.x == 0) next[blockIdx.x] = r;
}

__global__ void philox_kernel(uint64_t seed, uint64_t stream, uint32_t first_step, uint32_t lane,
                              int64_t count, double* u) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count)
    u[i] = kernels::hd::philox_uniform(seed, stream, first_step + static_cast<uint32_t>(i), lane);
}

__global__ void verify_greedy_chain_kernel(const int32_t* draft, const int32_t* argmax,
                                           int32_t k, int32_t* out, int32_t* n_emitted) {
  int32_t a = 0;
  while (a < k && draft[a] == argmax[a]) {
    out[a] = draft[a];
    ++a;
  }
  out[a] = argmax[a];
  *n_emitted = a + 1;
}

}  // namespace

void launch_argmax_rows(const float* logits, int64_t rows, int32_t vocab, int32_t* out,
                        cudaStream_t s) {
  if (rows == 0) return;
  argmax_rows_kernel<<<static_cast<unsigned>(rows), kThreads, 0, s>>>(logits, vocab, out);
  SSD_CUDA_LAUNCHED();
}

void launch_add_argmax(const float* base, const float* corr, float* logits, int64_t n,
                       int32_t vocab, int32_t* next, cudaStream_t s) {
  if (n == 0) return;
  add_argmax_kernel<<<static_cast<unsigned>(n), kThreads, 0, s>>>(base, corr, logits, vocab,
                                                                   next);
  SSD_CUDA_LAUNCHED();
}

void launch_philox_uniforms(uint64_t seed, uint64_t stream, uint32_t first_step, uint32_t lane,
                            int64_t count, double* u, cudaStream_t s) {
  if (count == 0) return;
  philox_kernel<<<static_cast<unsigned>((count + 255) / 256), 256, 0, s>>>(seed, stream,
                                                                           first_step, lane,
                                                                           count, u);
  SSD_CUDA_LAUNCHED();
}

void launch_verify_greedy_chain(const int32_t* draft, const int32_t* argmax, int32_t k,
                                int32_t* out, int32_t* n_emitted, cudaStream_t s) {
  verify_greedy_chain_kernel<<<1, 1, 0, s>>>(draft, argmax, k, out, n_emitted);
  SSD_CUDA_LAUNCHED();
}

}  // namespace ssd::cuda
