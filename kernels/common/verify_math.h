// The sampled-mode verification of one draft tree (a chain being the tree of one child per node)
// as a single SSD_HD function, so that the device verifier (kernels/cuda/verify_sampled.cu, one
// thread per tree) and its CPU twin run the same code, and both emit what ssd::verify_with_dists
// (runtime/spec/verify.cpp with the Residual of runtime/spec/residual.h) emits: the same tokens
// and path bit for bit, from the same Philox uniforms (siblings on their own accept lanes). The
// steps are sampling_math.h's (accept when u * z * q(x) < m(x); on a rejection
// m <- max(0, m - z * q) over q's list in order; the correction drawn from the residual in p's
// order), plus the Residual's two guards: Z summed afresh after cancellation (below 1e-3 of its
// previous value), and a residual left as it was when a rejection would empty it (below
// kVerifyZeroMass relative).
//
// Lists are CSR, probabilities in float64 as ProcessedDist holds them. Looking a token up in p
// goes through a token -> entry index (TokenIndex: scratch of one int32 per vocabulary id, -1
// for "absent"), filled from p's row before its children are tested and cleared after, so a
// rejection costs O(|p| + |q|), not O(|p| |q|): with a whole-vocabulary list (temperature only,
// 49k entries) the linear search cost ~10^9 steps per rejection on one GPU thread. The index is
// filled from the row's last entry to its first, so it names the first match, exactly as the
// linear search (kept for callers without scratch: index == null) does; both give the same
// result bit for bit (the twin test runs both). The caller validates the inputs as verify.cpp
// does (p and q sum to 1, the draft token has q > 0, ids unique and in 0..vocab): nothing here
// throws.
#pragma once

#include <cstdint>

#include "kernels/common/blocked_scan.h"
#include "kernels/common/hd.h"
#include "kernels/common/sampling_math.h"

namespace ssd::kernels::hd {

// runtime/sampling/sampler.h's lanes and runtime/spec/residual.h's zero-mass threshold (the twin
// test static_asserts that they agree).
inline constexpr uint32_t kVerifyLaneToken = 0;
inline constexpr uint32_t kVerifyLaneAccept = 1;
inline constexpr uint32_t kVerifyLaneResidual = 2;
inline constexpr double kVerifyZeroMass = 1e-12;

// runtime/sampling/sampler.h's accept_lane(): child j of a node tests with its own lane.
inline constexpr uint32_t kVerifyLaneAcceptMore = 3;
SSD_HD constexpr uint32_t verify_accept_lane(uint32_t sibling) {
  return sibling == 0 ? kVerifyLaneAccept : kVerifyLaneAcceptMore + sibling - 1;
}

// One draft tree of n nodes with its target rows p (row 0: the root's, row 1 + i: the one after
// node i) and its nodes' draft rows q, and its children as runtime/spec/verify.cpp's walk sees
// them: first[node + 1] is node's first child (-1: a leaf; first[0] is the root's), next[i] the
// sibling after node i, both in index order. A chain is the tree with first[d] = d (d < n).
struct TreeLists {
  const int32_t* p_ids = nullptr;   // [p_off[n + 1]] token ids, row after row
  const double* p_probs = nullptr;  // [p_off[n + 1]]
  const int64_t* p_off = nullptr;   // [n + 2] row r is [p_off[r], p_off[r + 1])
  const int32_t* q_ids = nullptr;   // [q_off[n]]
  const double* q_probs = nullptr;  // [q_off[n]]
  const int64_t* q_off = nullptr;   // [n + 1] node i's q is [q_off[i], q_off[i + 1])
  const int32_t* tokens = nullptr;  // [n] node i's token, drawn from its q
  const int32_t* first = nullptr;   // [n + 1]
  const int32_t* next = nullptr;    // [n]
  int32_t n = 0;
};

// Scratch for p's token -> entry lookups: at[id] for id in [0, size), every entry -1 between
// uses (verify_tree_sampled leaves it so). null at: look up linearly.
struct TokenIndex {
  int32_t* at = nullptr;  // [size]
  int32_t size = 0;
};

// Probability of `id` in list [b, e) of (ids, probs), the first match; 0 when absent.
SSD_HD double list_prob(const int32_t* ids, const double* probs, int64_t b, int64_t e,
                        int32_t id) {
  for (int64_t i = b; i < e; ++i)
    if (ids[i] == id) return probs[i];
  return 0.0;
}

// Verifies the tree with the uniforms at (seed, stream, position + depth, lane). Writes the
// emitted tokens (accepted drafts, then the correction or bonus token) to out[0..] and the
// accepted nodes to path[0..] (one fewer), returns the number emitted; *all_accepted as
// VerifyResult::all_accepted. mass, saved: scratch of at least the longest p row each. The
// caller has checked what verify.cpp checks (q sums to 1 with q(token) > 0, p valid, at most
// kMaxVerifySiblings children per node): nothing here throws.
// Fills (index) or clears (fill = false) the index for row [0, n) of ids; ids outside the index
// are left out (verify.cpp's checks keep them inside).
SSD_HD void index_row(const TokenIndex& index, const int32_t* ids, int64_t n, bool fill) {
  if (!index.at) return;
  for (int64_t i = n - 1; i >= 0; --i)
    if (ids[i] >= 0 && ids[i] < index.size) index.at[ids[i]] = fill ? static_cast<int32_t>(i) : -1;
}

// Entry of `id` in row [0, n) of ids (the first match), -1 when absent: through the index when
// there is one (filled for this row), else linearly.
SSD_HD int64_t find_entry(const TokenIndex& index, const int32_t* ids, int64_t n, int32_t id) {
  if (index.at) return id >= 0 && id < index.size ? index.at[id] : -1;
  for (int64_t i = 0; i < n; ++i)
    if (ids[i] == id) return i;
  return -1;
}

SSD_HD int32_t verify_tree_sampled(const TreeLists& t, uint64_t seed, uint64_t stream,
                                   uint32_t position, double* mass, double* saved, int32_t* out,
                                   int32_t* path, bool* all_accepted,
                                   const TokenIndex& index = TokenIndex{}) {
  *all_accepted = false;
  int32_t node = -1;  // the root
  for (int32_t d = 0;; ++d) {
    const uint32_t pos = position + static_cast<uint32_t>(d);
    const int64_t pb = t.p_off[node + 1], n_p = t.p_off[node + 2] - pb;
    const int32_t* p_ids = t.p_ids + pb;
    const double* p_probs = t.p_probs + pb;
    int32_t child = t.first[node + 1];
    if (child < 0) {  // a leaf (or an empty tree): the bonus draw from p itself
      // ssd::sample's blocked order; saved holds the chunk prefixes (scan_chunks(n_p) <= n_p).
      const double u = philox_uniform(seed, stream, pos, kVerifyLaneToken);
      auto p_of = [&](int64_t e) { return p_probs[e]; };
      chunk_prefix(n_p, p_of, saved);
      const int64_t i = blocked_inverse_cdf(saved, n_p, p_of, u);
      out[d] = p_ids[i < 0 ? n_p - 1 : i];
      *all_accepted = node >= 0;
      return d + 1;
    }
    // The residual m = z * r, starting as p (z = 1), shrunk by each rejected child in turn.
    for (int64_t i = 0; i < n_p; ++i) mass[i] = p_probs[i];
    index_row(index, p_ids, n_p, true);
    double z = 1.0;
    int32_t accepted = -1;
    for (uint32_t j = 0; child >= 0; child = t.next[child], ++j) {
      const int32_t x = t.tokens[child];
      const int64_t qb = t.q_off[child], qe = t.q_off[child + 1];
      const double q_x = list_prob(t.q_ids, t.q_probs, qb, qe, x);
      const double u = philox_uniform(seed, stream, pos, verify_accept_lane(j));
      const int64_t ex = find_entry(index, p_ids, n_p, x);
      if (residual_accepts(u, z, q_x, ex < 0 ? 0.0 : mass[ex])) {
        accepted = child;
        break;
      }
      // Rejected: m <- max(0, m - z q) over q's list in order.
      for (int64_t i = 0; i < n_p; ++i) saved[i] = mass[i];
      double removed = 0;
      for (int64_t jq = qb; jq < qe; ++jq) {
        const int64_t e = find_entry(index, p_ids, n_p, t.q_ids[jq]);
        if (e < 0) continue;  // off p's support: no mass to remove
        const double old = mass[e];
        const double now = residual_after_reject(old, z, t.q_probs[jq]);
        if (now == old) continue;
        mass[e] = now;
        removed = dadd_rn(removed, dsub_rn(old, now));
      }
      double z_new = dsub_rn(z, removed);
      if (!(z_new > 1e-3 * z)) {  // cancellation: sum what is left instead
        z_new = 0;
        for (int64_t i = 0; i < n_p; ++i) z_new = dadd_rn(z_new, mass[i]);
      }
      if (!(z_new > kVerifyZeroMass * z)) {  // r == q to rounding: the residual stays as it was
        for (int64_t i = 0; i < n_p; ++i) mass[i] = saved[i];
      } else {
        z = z_new;
      }
    }
    index_row(index, p_ids, n_p, false);  // every entry -1 again
    if (accepted < 0) {  // every child rejected: the correction is drawn from the residual
      const double ur = philox_uniform(seed, stream, pos, kVerifyLaneResidual);
      const int64_t i = inverse_cdf(n_p, [&](int64_t e) { return mass[e]; }, ur, z);
      out[d] = p_ids[i < 0 ? n_p - 1 : i];
      return d + 1;
    }
    out[d] = t.tokens[accepted];
    path[d] = accepted;
    node = accepted;
  }
}

}  // namespace ssd::kernels::hd
