// ssd::process() (runtime/sampling/sampler.h) cut into the pieces a device runs, as SSD_HD
// functions, so that the device builds exactly the list the CPU builds: the same tokens, the
// same probabilities bit for bit (so the same token for the same Philox uniform).
//
// The device does not copy the CPU's shortcuts (the top-k heap, the min-p logit threshold, the
// top-p mass floor); each only spares work and, as sampler.cpp argues, never changes the list.
// Its plan instead, per row:
//   1. l_max (NaN ignored) and the count of valid logits (not -inf, not NaN);
//   2. e_i = relative_exp_one(logit_i) for every token, and one order key per token:
//        top-k path (top_k > 0 and at least top_k valid logits): every valid token is a
//          candidate; the first top_k of the sorted keys are the CPU's top_k_keys;
//        otherwise: a token is a candidate when e_i > 0 and e_i >= min_p (min-p's cut, which
//          the CPU applies through its floor; its top-p floor only drops tokens past the cut);
//      the rest get kNoKey, which sorts last;
//   3. the keys sorted (unique: the id is in the low half, so any correct sort agrees);
//   4. Z: on the top-k path the sum of e over the top_k keys in list order, as the CPU does;
//      otherwise over the whole vocabulary in relative_exp's order (four interleaved partial
//      sums over the first n - n % 4 tokens, (s0 + s1) + (s2 + s3), then the tail in order):
//      z_lane_partial() is one of the four lanes, so four device threads run them at once;
//   5. kept_count(): the top-p prefix (running sum in list order >= top_p * Z), then on the
//      top-k path the min-p prefix, then trailing zeros dropped;
//   6. the kept entries' sum in list order, and p_i = e_i / sum.
// Sums run in the CPU's order, one thread each, so they round alike (the price: a chain of up
// to `vocab` dependent double additions for Z's lanes and for the list sums of an uncut list).
#pragma once

#include <cstdint>

#include "kernels/common/hd.h"
#include "kernels/common/sampling_math.h"

namespace ssd::kernels::hd {

// Sorts after every real key (a real key's id half is a token id < 2^31).
inline constexpr uint64_t kNoKey = ~uint64_t{0};

// Step 2's path: the top-k path when top_k > 0 and at least top_k logits are valid.
SSD_HD bool use_top_k_path(int32_t top_k, int64_t n_valid) {
  return top_k > 0 && n_valid >= top_k;
}

// A logit that can be sampled at all: neither -inf nor NaN (+inf is the caller's error).
SSD_HD bool valid_logit(float logit) { return logit > -f32_from_bits(0x7f800000u); }

// Step 2's key of token `id`: its order key when it is a candidate on this path, else kNoKey.
SSD_HD uint64_t candidate_key(float logit, int32_t id, double e, bool top_k_path, double min_p) {
  const bool candidate = top_k_path ? valid_logit(logit) : (e > 0 && e >= min_p);
  return candidate ? order_key(logit, id) : kNoKey;
}

// relative_exp's partial sum of lane j (0..3): e(j) + e(j + 4) + ... over the first n - n % 4
// entries, in that order.
template <class E>
SSD_HD double z_lane_partial(int64_t n, E&& e, int lane) {
  const int64_t n4 = n - n % 4;
  double s = 0;
  for (int64_t i = lane; i < n4; i += 4) s = dadd_rn(s, e(i));
  return s;
}

// relative_exp's total from its four lane partials: (s0 + s1) + (s2 + s3), then the tail.
template <class E>
SSD_HD double z_combine(const double* s4, int64_t n, E&& e) {
  double z = dadd_rn(dadd_rn(s4[0], s4[1]), dadd_rn(s4[2], s4[3]));
  for (int64_t i = n - n % 4; i < n; ++i) z = dadd_rn(z, e(i));
  return z;
}

// A sum in list order (Z on the top-k path; the kept entries' sum of step 6).
template <class E>
SSD_HD double list_sum(int64_t n, E&& e) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s = dadd_rn(s, e(i));
  return s;
}

// Step 5 over a sorted candidate list of n entries with weights e(i): the top-p prefix when
// top_p < 1 (target top_p * z), then, when min_p_scan (the top-k path with min_p > 0), the
// prefix with e >= min_p, then trailing entries with e == 0 dropped (never the first).
template <class E>
SSD_HD int64_t kept_count(int64_t n, E&& e, double top_p, double z, double min_p,
                          bool min_p_scan) {
  int64_t keep = top_p < 1 ? top_p_count(n, e, dmul_rn(top_p, z)) : n;
  if (min_p_scan) {
    int64_t i = 0;
    while (i < keep && e(i) >= min_p) ++i;
    keep = i;
  }
  while (keep > 1 && e(keep - 1) == 0) --keep;
  return keep;
}

}  // namespace ssd::kernels::hd
