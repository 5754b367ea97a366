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
//   4. Z: on the top-k path the sum of e over the top_k keys in list order, otherwise over the
//      whole vocabulary by token id, both in the blocked order of blocked_scan.h (the CPU's
//      relative_exp sums Z the same way);
//   5. kept_count(): the top-p prefix (the first entry whose blocked running sum in list order
//      reaches top_p * Z), then on the top-k path the min-p prefix, then trailing zeros dropped;
//   6. the kept entries' sum (blocked, list order), and p_i = e_i / sum.
// Every sum is in the blocked order (kernels/common/blocked_scan.h), which a thread block
// computes together (kernels/cuda/block_scan.cuh) and the CPU sampler runs serially, so both
// round alike. The min-p prefix and the trailing zeros are searches, not sums: any order finds
// the same entry.
#pragma once

#include <cstdint>

#include "kernels/common/blocked_scan.h"
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

// Step 5 over a sorted candidate list of n entries with weights e(i) and its blocked prefix pre
// (chunk_prefix over the list): the top-p prefix when top_p < 1 (target top_p * z), then, when
// min_p_scan (the top-k path with min_p > 0), the prefix with e >= min_p, then trailing entries
// with e == 0 dropped (never the first).
template <class E>
SSD_HD int64_t kept_count(const double* pre, int64_t n, E&& e, double top_p, double z,
                          double min_p, bool min_p_scan) {
  int64_t keep = top_p < 1 ? blocked_top_p_count(pre, n, e, dmul_rn(top_p, z)) : n;
  if (min_p_scan) {
    int64_t i = 0;
    while (i < keep && e(i) >= min_p) ++i;
    keep = i;
  }
  while (keep > 1 && e(keep - 1) == 0) --keep;
  return keep;
}

}  // namespace ssd::kernels::hd
