// The sampled-mode verification of one draft chain as a single SSD_HD function, so that the
// device verifier (kernels/cuda/verify_sampled.cu, one thread per chain) and its CPU twin run the
// same code, and both emit what ssd::verify_with_dists (runtime/spec/verify.cpp with the
// Residual of runtime/spec/residual.h) emits for a chain: the same tokens bit for bit, from the
// same Philox uniforms. The steps are sampling_math.h's (accept when u * z * q(x) < m(x); on a
// rejection m <- max(0, m - z * q) over q's list in order; the correction drawn from the residual
// in p's order), plus the Residual's two guards: Z summed afresh after cancellation (below 1e-3 of
// its previous value), and a residual left as p when a rejection would empty it (below
// kVerifyZeroMass relative).
//
// Lists are CSR, probabilities in float64 as ProcessedDist holds them. Token lookups are linear
// in the list (a list is the kept candidates, typically tens of entries); a whole-vocabulary
// list (temperature only) makes them O(|p| |q|) per rejection, which a token -> entry index on the
// device would fix. The caller validates the inputs as verify.cpp does (p and q sum to 1, the
// draft token has q > 0, ids unique): nothing here throws.
#pragma once

#include <cstdint>

#include "kernels/common/hd.h"
#include "kernels/common/sampling_math.h"

namespace ssd::kernels::hd {

// runtime/sampling/sampler.h's lanes and runtime/spec/residual.h's zero-mass threshold (the twin
// test static_asserts that they agree).
inline constexpr uint32_t kVerifyLaneToken = 0;
inline constexpr uint32_t kVerifyLaneAccept = 1;
inline constexpr uint32_t kVerifyLaneResidual = 2;
inline constexpr double kVerifyZeroMass = 1e-12;

// One chain of k draft tokens with its target rows p[0..k] and draft rows q[0..k).
struct ChainLists {
  const int32_t* p_ids = nullptr;     // [p_off[k + 1]] token ids, row after row
  const double* p_probs = nullptr;    // [p_off[k + 1]]
  const int64_t* p_off = nullptr;     // [k + 2] row r is [p_off[r], p_off[r + 1])
  const int32_t* q_ids = nullptr;     // [q_off[k]]
  const double* q_probs = nullptr;    // [q_off[k]]
  const int64_t* q_off = nullptr;     // [k + 1]
  const int32_t* draft = nullptr;     // [k] draft tokens; draft[d] was drawn from q row d
  int32_t k = 0;
};

// Probability of `id` in list [b, e) of (ids, probs), the first match; 0 when absent.
SSD_HD double list_prob(const int32_t* ids, const double* probs, int64_t b, int64_t e,
                        int32_t id) {
  for (int64_t i = b; i < e; ++i)
    if (ids[i] == id) return probs[i];
  return 0.0;
}

// Verifies the chain with the uniforms at (seed, stream, position + depth, lane). Writes the
// emitted tokens (accepted drafts, then the correction or bonus token) to out[0..k] and returns
// their count; *all_accepted as VerifyResult::all_accepted. mass: scratch of at least the
// longest p row.
SSD_HD int32_t verify_chain_sampled(const ChainLists& c, uint64_t seed, uint64_t stream,
                                    uint32_t position, double* mass, int32_t* out,
                                    bool* all_accepted) {
  *all_accepted = false;
  for (int32_t d = 0;; ++d) {
    const uint32_t pos = position + static_cast<uint32_t>(d);
    const int64_t pb = c.p_off[d], n_p = c.p_off[d + 1] - pb;
    const int32_t* p_ids = c.p_ids + pb;
    const double* p_probs = c.p_probs + pb;
    if (d == c.k) {  // after the last draft (or an empty chain): the bonus draw from p itself
      double total = 0;
      for (int64_t i = 0; i < n_p; ++i) total = dadd_rn(total, p_probs[i]);
      const double u = philox_uniform(seed, stream, pos, kVerifyLaneToken);
      const int64_t i = inverse_cdf(n_p, [&](int64_t e) { return p_probs[e]; }, u, total);
      out[d] = p_ids[i < 0 ? n_p - 1 : i];
      *all_accepted = c.k > 0;
      return d + 1;
    }
    const int32_t x = c.draft[d];
    const double q_x = list_prob(c.q_ids, c.q_probs, c.q_off[d], c.q_off[d + 1], x);
    const double u = philox_uniform(seed, stream, pos, kVerifyLaneAccept);
    if (residual_accepts(u, 1.0, q_x, list_prob(p_ids, p_probs, 0, n_p, x))) {
      out[d] = x;
      continue;
    }
    // Rejected: r <- max(0, p - q) over q's list in order (Z = 1 before it).
    for (int64_t i = 0; i < n_p; ++i) mass[i] = p_probs[i];
    double removed = 0;
    for (int64_t j = c.q_off[d]; j < c.q_off[d + 1]; ++j) {
      int64_t e = -1;
      for (int64_t i = 0; i < n_p && e < 0; ++i)
        if (p_ids[i] == c.q_ids[j]) e = i;
      if (e < 0) continue;  // off p's support: no mass to remove
      const double old = mass[e];
      const double now = residual_after_reject(old, 1.0, c.q_probs[j]);
      if (now == old) continue;
      mass[e] = now;
      removed = dadd_rn(removed, dsub_rn(old, now));
    }
    double z = dsub_rn(1.0, removed);
    if (!(z > 1e-3)) {  // cancellation: sum what is left instead
      z = 0;
      for (int64_t i = 0; i < n_p; ++i) z = dadd_rn(z, mass[i]);
    }
    if (!(z > kVerifyZeroMass)) {  // r == q to rounding: the residual stays p
      for (int64_t i = 0; i < n_p; ++i) mass[i] = p_probs[i];
      z = 1.0;
    }
    const double ur = philox_uniform(seed, stream, pos, kVerifyLaneResidual);
    const int64_t i = inverse_cdf(n_p, [&](int64_t e) { return mass[e]; }, ur, z);
    out[d] = p_ids[i < 0 ? n_p - 1 : i];
    return d + 1;
  }
}

}  // namespace ssd::kernels::hd
