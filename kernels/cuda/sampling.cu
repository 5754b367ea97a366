// Device sampling and verification pieces: per-row argmax (greedy decoding and greedy
// verification), Philox uniforms, the greedy chain verifier, and the Domino head's fused
// "base + correction, then argmax" over a block of chains. Their rules are kernels/common/
// sampling_math.h's (twin-tested against runtime/sampling and runtime/spec) and ssd::argmax's
// (lowest index on ties, NaN never wins). Not yet run on a GPU.
#include <cmath>

#include "kernels/common/domino_math.h"
#include "kernels/common/row_math.h"
#include "kernels/common/sampling_math.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/kernels.cuh"

namespace ssd::cuda {
namespace {

constexpr int kThreads = kernels::hd::kRowThreads;

// (value, index) with "better" = larger value, then lower index; NaN never better (the rule
// of ssd::argmax, shared with the fused Domino walk: kernels/common/domino_math.h).
__device__ bool better(float a, int32_t ia, float b, int32_t ib) {
  return kernels::hd::argmax_better(a, ia, b, ib);
}

// Block argmax of row [0, vocab); every thread gets the result's index (-1 if all NaN).
__device__ int32_t block_argmax(const float* row, int32_t vocab) {
  __shared__ float sv[kThreads];
  __shared__ int32_t si[kThreads];
  const int t = static_cast<int>(threadIdx.x);
  float bv = 0.0f;
  int32_t bi = -1;
  for (int32_t i = t; i < vocab; i += kThreads) {
    const float v = row[i];
    if (v != v) continue;  // NaN
    if (better(v, i, bv, bi)) {
      bv = v;
      bi = i;
    }
  }
  sv[t] = bv;
  si[t] = bi;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s /= 2) {
    if (t < s && better(sv[t + s], si[t + s], sv[t], si[t])) {
      sv[t] = sv[t + s];
      si[t] = si[t + s];
    }
    __syncthreads();
  }
  const int32_t r = si[0];
  __syncthreads();  // the shared arrays may be reused by the caller's next row
  return r;
}

__global__ void argmax_rows_kernel(const float* logits, int32_t vocab, int32_t* out) {
  const int32_t r = block_argmax(logits + static_cast<int64_t>(blockIdx.x) * vocab, vocab);
  if (threadIdx.x == 0) out[blockIdx.x] = r;
}

__global__ void add_argmax_kernel(const float* base, const float* corr, float* logits,
                                  int32_t vocab, int32_t* next) {
  const int64_t off = static_cast<int64_t>(blockIdx.x) * vocab;
  for (int32_t i = static_cast<int32_t>(threadIdx.x); i < vocab; i += kThreads)
    logits[off + i] = kernels::hd::add_rn(base[off + i], corr[off + i]);
  __syncthreads();
  const int32_t r = block_argmax(logits + off, vocab);
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
