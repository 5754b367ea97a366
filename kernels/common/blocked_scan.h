// Sums and running sums over a list in one fixed "blocked" order, shared by the device sampler's
// block-wide kernels (kernels/cuda/block_scan.cuh) and the CPU sampler (runtime/sampling), so
// that both round alike and draw the same tokens. A plain left-to-right sum of a 49k-entry list
// is a chain of 49k dependent additions, which on a GPU runs on one thread; the blocked order
// lets a thread block share the work and still gives one answer, whoever computes it.
//
// The order, for weights w(0), ..., w(n - 1) (C = kScanChunk):
//   1. chunk c holds entries [c C, min(n, (c + 1) C)); its total S[c] is summed from 0, left to
//      right;
//   2. the m = ceil(n / C) chunk totals are scanned by a Kogge-Stone tree: x = S; for
//      off = 1, 2, 4, ... < m, every c >= off at once: x[c] = x[c - off] + x[c]; then the
//      exclusive prefix P[c] = x[c - 1] (P[0] = 0);
//   3. the running sum at entry i of chunk c is P[c] + w(c C) + ... + w(i), added left to
//      right onto P[c]; the sum of the first k entries is the running sum at k - 1 (0 for k = 0).
// Prefix-stable: the running sum at i depends on w(0..i) only, never on n (chunk c's P uses
// S[0..c - 1], each a whole chunk), so a list cut short (the CPU's floor below the top-p cut)
// and the device's whole candidate list give the same running sums and the same cut.
// Within a chunk the running sums never decrease; across a chunk boundary they may step down by
// a rounding (P[c + 1] is not the running sum at the chunk's end): the searches below take the
// first entry that meets their test, which both sides compute alike.
//
// The serial functions here are the reference: the CPU sampler runs them, and the device runs
// the same arithmetic spread over a block (each thread its chunks; the tree one level per step).
// All additions go through dadd_rn (never contracted on the device).
#pragma once

#include <cstdint>

#include "kernels/common/hd.h"

namespace ssd::kernels::hd {

inline constexpr int64_t kScanChunk = 64;  // entries per chunk (step 1)

// Chunks of a list of n entries (scratch of a prefix: m doubles).
SSD_HD constexpr int64_t scan_chunks(int64_t n) { return (n + kScanChunk - 1) / kScanChunk; }

// Step 1: S[c], chunk c's total, left to right from 0.
template <class W>
SSD_HD double chunk_total(int64_t c, int64_t n, W&& w) {
  const int64_t b = c * kScanChunk, e = b + kScanChunk < n ? b + kScanChunk : n;
  double s = 0;
  for (int64_t i = b; i < e; ++i) s = dadd_rn(s, w(i));
  return s;
}

// Step 2 on one thread, in place: x[0..m) holds the chunk totals S and leaves as P. The tree's
// levels run from the top index down, so every x[c - off] read is still the level's input.
SSD_HD void exclusive_tree_scan(double* x, int64_t m) {
  for (int64_t off = 1; off < m; off *= 2)
    for (int64_t c = m - 1; c >= off; --c) x[c] = dadd_rn(x[c - off], x[c]);
  for (int64_t c = m - 1; c > 0; --c) x[c] = x[c - 1];
  if (m > 0) x[0] = 0;
}

// Steps 1-2 on one thread: pre[0..m) = P (m = scan_chunks(n)).
template <class W>
SSD_HD void chunk_prefix(int64_t n, W&& w, double* pre) {
  const int64_t m = scan_chunks(n);
  for (int64_t c = 0; c < m; ++c) pre[c] = chunk_total(c, n, w);
  exclusive_tree_scan(pre, m);
}

// Step 3: the running sum at entry i (pre from chunk_prefix or the device's block prefix).
template <class W>
SSD_HD double running_sum(const double* pre, int64_t i, W&& w) {
  const int64_t c = i / kScanChunk;
  double run = pre[c];
  for (int64_t j = c * kScanChunk; j <= i; ++j) run = dadd_rn(run, w(j));
  return run;
}

// The sum of the first k entries in the blocked order.
template <class W>
SSD_HD double blocked_sum(const double* pre, int64_t k, W&& w) {
  return k > 0 ? running_sum(pre, k - 1, w) : 0.0;
}

// Entries [b, e) of chunk c (e <= chunk end): the first i whose running sum reaches target
// (run >= target: top-p's cut), or -1. Used per chunk by the serial search and by each thread
// of the device's block search.
template <class W>
SSD_HD int64_t first_reach_in_chunk(const double* pre, int64_t c, int64_t n, W&& w,
                                    double target) {
  const int64_t b = c * kScanChunk, e = b + kScanChunk < n ? b + kScanChunk : n;
  double run = pre[c];
  for (int64_t i = b; i < e; ++i) {
    run = dadd_rn(run, w(i));
    if (run >= target) return i;
  }
  return -1;
}

// The inverse CDF's test within chunk c: the first i with w(i) > 0 and target < running sum,
// or -1.
template <class W>
SSD_HD int64_t first_above_in_chunk(const double* pre, int64_t c, int64_t n, W&& w,
                                    double target) {
  const int64_t b = c * kScanChunk, e = b + kScanChunk < n ? b + kScanChunk : n;
  double run = pre[c];
  for (int64_t i = b; i < e; ++i) {
    const double wi = w(i);
    run = dadd_rn(run, wi);
    if (wi > 0 && target < run) return i;
  }
  return -1;
}

// Top-p's count: the shortest prefix whose running sum reaches target (the index of the first
// entry that does, plus one), or n when none does.
template <class W>
SSD_HD int64_t blocked_top_p_count(const double* pre, int64_t n, W&& w, double target) {
  for (int64_t c = 0; c < scan_chunks(n); ++c) {
    const int64_t i = first_reach_in_chunk(pre, c, n, w, target);
    if (i >= 0) return i + 1;
  }
  return n;
}

// Inverse CDF over n weights (>= 0) in list order, blocked: total = the blocked sum of all n,
// target = u * total; the first entry with w > 0 whose running sum exceeds target, else (the
// rounding ran past the end) the last entry with w > 0; -1 when there is none. ssd::sample.
template <class W>
SSD_HD int64_t blocked_inverse_cdf(const double* pre, int64_t n, W&& w, double u) {
  const double target = dmul_rn(u, blocked_sum(pre, n, w));
  for (int64_t c = 0; c < scan_chunks(n); ++c) {
    const int64_t i = first_above_in_chunk(pre, c, n, w, target);
    if (i >= 0) return i;
  }
  for (int64_t i = n - 1; i >= 0; --i)
    if (w(i) > 0) return i;
  return -1;
}

}  // namespace ssd::kernels::hd
