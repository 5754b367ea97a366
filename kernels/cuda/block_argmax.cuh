// One thread block's argmax over a row, for every kernel that picks a token on the device (the
// sampling kernels' greedy rows, the fused Domino walk): each thread scans a strided slice, then
// a shared-memory tree keeps the better (value, index) of each pair. "Better" is ssd::argmax's
// rule (larger value, then lower index; NaN never wins: kernels/common/domino_math.h), and it
// is associative and commutative, so the result does not depend on the reduction's shape.
// Every thread gets the index (-1 when the row is all NaN). Threads: kThreads, a power of two.
#pragma once

#include <cstdint>

#include "kernels/common/domino_math.h"

namespace ssd::cuda {

template <int kThreads>
__device__ int32_t block_argmax(const float* row, int64_t n) {
  __shared__ float sv[kThreads];
  __shared__ int32_t si[kThreads];
  const int t = static_cast<int>(threadIdx.x);
  float bv = 0.0f;
  int32_t bi = -1;
  for (int64_t i = t; i < n; i += kThreads) {
    const float v = row[i];
    if (v != v) continue;  // NaN
    if (kernels::hd::argmax_better(v, static_cast<int32_t>(i), bv, bi)) {
      bv = v;
      bi = static_cast<int32_t>(i);
    }
  }
  sv[t] = bv;
  si[t] = bi;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s /= 2) {
    if (t < s && kernels::hd::argmax_better(sv[t + s], si[t + s], sv[t], si[t])) {
      sv[t] = sv[t + s];
      si[t] = si[t + s];
    }
    __syncthreads();
  }
  const int32_t r = si[0];
  __syncthreads();  // sv / si may be reused by the caller's next row
  return r;
}

}  // namespace ssd::cuda
