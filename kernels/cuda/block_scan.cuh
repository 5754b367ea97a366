// The blocked order of kernels/common/blocked_scan.h spread over one thread block, for the
// device sampler's sums and searches (kernels/cuda/device_sampler.cu):
//   block_chunk_prefix  thread t sums the chunks t, t + kThreads, ... (each left to right, as
//                       chunk_total does); then the Kogge-Stone tree, one level per step over
//                       the whole block, ping-ponging between two scratch arrays; then the
//                       shift to exclusive prefixes. The same additions on the same operands as
//                       the serial chunk_prefix, so the same bits;
//   block_top_p_count,  each thread searches its chunks from their prefixes (the serial
//   block_inverse_cdf   per-chunk searches), then the smallest hit over the block: the first
//                       entry that meets the test, as the serial search finds it.
// The searches' fallbacks (no hit) are the serial ones. Every thread of the block must call
// each function (they synchronise), and every thread gets the result.
#pragma once

#include <cstdint>

#include "kernels/common/blocked_scan.h"

namespace ssd::cuda {

// The smallest (take_min) or largest v over the block; every thread gets it.
template <int kThreads>
__device__ int64_t block_extreme(int64_t v, bool take_min) {
  __shared__ int64_t s[kThreads];
  const int t = static_cast<int>(threadIdx.x);
  s[t] = v;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (t < half) {
      const int64_t o = s[t + half];
      if (take_min ? o < s[t] : o > s[t]) s[t] = o;
    }
    __syncthreads();
  }
  const int64_t r = s[0];
  __syncthreads();  // s may be reused by the next call
  return r;
}

// P, the chunk prefixes of w over [0, n) (kernels/common/blocked_scan.h steps 1-2), in a or b
// (the pointer returned). a, b: [scan_chunks(n)] doubles of global scratch each.
template <int kThreads, class W>
__device__ const double* block_chunk_prefix(int64_t n, W w, double* a, double* b) {
  namespace hd = kernels::hd;
  const int64_t m = hd::scan_chunks(n);
  const int64_t t = threadIdx.x;
  for (int64_t c = t; c < m; c += kThreads) a[c] = hd::chunk_total(c, n, w);
  __syncthreads();
  double* src = a;
  double* dst = b;
  for (int64_t off = 1; off < m; off *= 2) {
    for (int64_t c = t; c < m; c += kThreads)
      dst[c] = c >= off ? hd::dadd_rn(src[c - off], src[c]) : src[c];
    __syncthreads();
    double* x = src;
    src = dst;
    dst = x;
  }
  for (int64_t c = t; c < m; c += kThreads) dst[c] = c > 0 ? src[c - 1] : 0.0;
  __syncthreads();
  return dst;
}

// hd::blocked_top_p_count over the block.
template <int kThreads, class W>
__device__ int64_t block_top_p_count(const double* pre, int64_t n, W w, double target) {
  namespace hd = kernels::hd;
  int64_t hit = INT64_MAX;
  for (int64_t c = threadIdx.x; c < hd::scan_chunks(n); c += kThreads) {
    const int64_t i = hd::first_reach_in_chunk(pre, c, n, w, target);
    if (i >= 0) {
      hit = i;  // this thread's later chunks only hold later entries
      break;
    }
  }
  hit = block_extreme<kThreads>(hit, true);
  return hit == INT64_MAX ? n : hit + 1;
}

// hd::blocked_inverse_cdf over the block.
template <int kThreads, class W>
__device__ int64_t block_inverse_cdf(const double* pre, int64_t n, W w, double u) {
  namespace hd = kernels::hd;
  const double target = hd::dmul_rn(u, hd::blocked_sum(pre, n, w));
  int64_t hit = INT64_MAX;
  for (int64_t c = threadIdx.x; c < hd::scan_chunks(n); c += kThreads) {
    const int64_t i = hd::first_above_in_chunk(pre, c, n, w, target);
    if (i >= 0) {
      hit = i;
      break;
    }
  }
  hit = block_extreme<kThreads>(hit, true);
  if (hit != INT64_MAX) return hit;
  int64_t last = -1;  // the rounding ran past the end: the last entry with w > 0
  for (int64_t i = threadIdx.x; i < n; i += kThreads)
    if (w(i) > 0) last = i;
  return block_extreme<kThreads>(last, false);
}

}  // namespace ssd::cuda
