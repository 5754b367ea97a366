// kernels/cuda/block_scan.cuh run on the CPU: threads t = 0..T-1 of one block emulated one after
// the other between the barriers, with the very SSD_HD per-chunk functions the kernels call. The
// twin tests compare it with the serial reference (kernels/common/blocked_scan.h), so that a
// change to how the block shares the work (not only to the arithmetic) is caught without a GPU.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/common/blocked_scan.h"

namespace ssd::testing {

// block_chunk_prefix: chunk totals by thread stride, the tree level by level into the other
// buffer, then the shift to exclusive prefixes. Returns P ([m]).
template <class W>
std::vector<double> block_chunk_prefix(int64_t n, W&& w, int threads) {
  namespace hd = kernels::hd;
  const int64_t m = hd::scan_chunks(n);
  std::vector<double> a(static_cast<size_t>(m)), b(static_cast<size_t>(m));
  for (int t = 0; t < threads; ++t)
    for (int64_t c = t; c < m; c += threads) a[c] = hd::chunk_total(c, n, w);
  std::vector<double>* src = &a;
  std::vector<double>* dst = &b;
  for (int64_t off = 1; off < m; off *= 2) {
    for (int t = 0; t < threads; ++t)
      for (int64_t c = t; c < m; c += threads)
        (*dst)[c] = c >= off ? hd::dadd_rn((*src)[c - off], (*src)[c]) : (*src)[c];
    std::swap(src, dst);
  }
  for (int t = 0; t < threads; ++t)
    for (int64_t c = t; c < m; c += threads) (*dst)[c] = c > 0 ? (*src)[c - 1] : 0.0;
  return *dst;
}

// The block searches: each thread's first hit over its chunks, then the block's smallest.
template <class Find>
int64_t block_first_hit(int64_t m, int threads, Find&& find) {
  int64_t best = std::numeric_limits<int64_t>::max();
  for (int t = 0; t < threads; ++t)
    for (int64_t c = t; c < m; c += threads) {
      const int64_t i = find(c);
      if (i >= 0) {
        best = std::min(best, i);
        break;
      }
    }
  return best;
}

template <class W>
int64_t block_top_p_count(const double* pre, int64_t n, W&& w, double target, int threads) {
  namespace hd = kernels::hd;
  const int64_t hit = block_first_hit(hd::scan_chunks(n), threads, [&](int64_t c) {
    return hd::first_reach_in_chunk(pre, c, n, w, target);
  });
  return hit == std::numeric_limits<int64_t>::max() ? n : hit + 1;
}

template <class W>
int64_t block_inverse_cdf(const double* pre, int64_t n, W&& w, double u, int threads) {
  namespace hd = kernels::hd;
  const double target = hd::dmul_rn(u, hd::blocked_sum(pre, n, w));
  const int64_t hit = block_first_hit(hd::scan_chunks(n), threads, [&](int64_t c) {
    return hd::first_above_in_chunk(pre, c, n, w, target);
  });
  if (hit != std::numeric_limits<int64_t>::max()) return hit;
  int64_t last = -1;
  for (int t = 0; t < threads; ++t)
    for (int64_t i = t; i < n; i += threads)
      if (w(i) > 0) last = std::max(last, i);
  return last;
}

}  // namespace ssd::testing
