// Token sampling from logits. The design separates WHAT is drawn from HOW it is drawn:
//   process()  turns logits + SamplerConfig into the exact distribution the sampler draws from,
//              a sparse list of (token id, probability);
//   sample()   draws from such a list by inverse CDF with a caller-given uniform u.
// Speculative decoding needs the first half on its own: verification compares the target's and
// the drafter's processed distributions (accept with min(1, p/q), resample from max(0, p - q)),
// which keeps the output distributed exactly as the user's sampler settings say only if both
// sides go through the very same process(). The uniforms come from Philox (philox.h) addressed by
// (seed, stream, step, lane), so any rank can reproduce any draw.
//
// The pipeline of process(), for temperature T > 0 (T == 0 is greedy: a one-hot at argmax):
//   1. tokens whose logit is NaN or -inf are out (probability 0); a +inf logit is an error.
//   2. top-k (k > 0): keep the k largest logits (ties broken by lower id).
//   3. e_i = exp((l_i - l_max) / T) in double, Z = sum of e_i over the top-k survivors
//      (so the softmax is renormalised after top-k, as in the usual definition). An exponent
//      below -708 counts as e_i = 0 (relative probability < 1e-307; see vocab_scan.h).
//   4. top-p (p < 1): in sorted order, keep the smallest prefix whose running sum of e_i / Z
//      reaches p (in double); if rounding keeps it from ever reaching p, everything is kept.
//   5. min-p (m > 0): keep tokens with p_i >= m * p_max, i.e. e_i >= m since e of the top is 1.
//   6. renormalise over the survivors; tokens with e_i = 0 are dropped.
// Top-p and min-p both keep a prefix of the same order, so their order does not matter for the
// result, but top-p's mass is measured before min-p (step 4 uses Z from step 3).
//
// Order of the list: logit descending, then id ascending. Probabilities are therefore
// non-increasing along the list, and equal probabilities are ordered by id (the only exception:
// two distinct logits close enough that their probabilities round to the same double).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "runtime/sampling/philox.h"

namespace ssd {

struct SamplerConfig {
  float temperature = 0;  // 0 = greedy (argmax); otherwise > 0
  int32_t top_k = 0;      // 0 = off
  float top_p = 1;        // in (0, 1]; 1 = off
  float min_p = 0;        // in [0, 1]; 0 = off
  uint64_t seed = 0;      // Philox key for the draws
};

// Throws ssd::Error naming the offending field when a value is outside its range.
void validate(const SamplerConfig& cfg);
inline bool is_greedy(const SamplerConfig& cfg) { return cfg.temperature == 0; }

struct TokenProb {
  int32_t id;
  double prob;
};

struct ProcessedDist {
  std::vector<TokenProb> tokens;  // all prob > 0, order as described at the top, sum ~= 1

  // Probability of `id` (0 when not in the support). Linear in the support size.
  double prob_of(int32_t id) const;
  size_t size() const { return tokens.size(); }
};

// Index of the largest logit; the lowest index wins ties. NaN logits are skipped (a NaN never
// wins); throws ssd::Error when n <= 0 or every logit is NaN.
int32_t argmax(const float* logits, int32_t n);

// The distribution the sampler draws from (see the pipeline above). logits: [n].
// Uses a thread-local scratch buffer, so concurrent calls from different threads are safe.
ProcessedDist process(const float* logits, int32_t n, const SamplerConfig& cfg);
// The same, into `out`, reusing its storage (for a caller that processes every position).
void process_into(const float* logits, int32_t n, const SamplerConfig& cfg, ProcessedDist& out);

// Inverse CDF: the first token whose running probability sum exceeds u * (sum of the list).
// u must be in [0, 1). The running sum is in list order, so the result is a pure function of
// (dist, u).
int32_t sample(const ProcessedDist& dist, double u);

// Which Philox lane each kind of draw uses at a given (stream, step), so that the uniforms used
// for different decisions at the same position are independent.
inline constexpr uint32_t kLaneToken = 0;     // the token drawn from a processed distribution
inline constexpr uint32_t kLaneAccept = 1;    // speculative verification: accept / reject
inline constexpr uint32_t kLaneResidual = 2;  // speculative verification: draw after a reject
// Verification tries a node's children in order at the same position, one accept test each:
// child 0 uses kLaneAccept, child j >= 1 uses kLaneAcceptMore + j - 1, so no two tests share a
// uniform and none shares one with the token / residual draws (see runtime/spec/verify.h).
inline constexpr uint32_t kLaneAcceptMore = 3;
constexpr uint32_t accept_lane(uint32_t sibling) {
  return sibling == 0 ? kLaneAccept : kLaneAcceptMore + sibling - 1;
}
// Draft-model / oracle drafters' own draws, above the verifier's lanes (which stay below
// kLaneDrafter, see kMaxVerifySiblings): branch j of a draft draws its token at
// kLaneDrafter + j (j < 16); the oracle draws the target's own token of branch j at
// kLaneOracleTarget + j.
inline constexpr uint32_t kLaneDrafter = 64;
inline constexpr uint32_t kLaneOracleTarget = 80;
// The most children one node may have in verification, so that accept_lane() stays below
// kLaneDrafter (verify throws ssd::Error on a wider node).
inline constexpr uint32_t kMaxVerifySiblings = kLaneDrafter - kLaneAcceptMore + 1;
static_assert(accept_lane(kMaxVerifySiblings - 1) < kLaneDrafter);
// The Domino block drafter's sampled draft tokens (runtime/drafters/domino/domino_head.h): one
// chain per block, so one lane.
inline constexpr uint32_t kLaneDominoDraft = 96;
// The early-exit (DVI) drafter's sampled draft tokens (runtime/drafters/early_exit_drafter.h):
// one chain per request, so one lane.
inline constexpr uint32_t kLaneEarlyExitDraft = 97;

// A sampler bound to one configuration. Stateless apart from its config: the draw for
// (stream, step) is Philox(seed, stream, step, kLaneToken), whatever was drawn before.
class Sampler {
 public:
  explicit Sampler(const SamplerConfig& cfg);

  const SamplerConfig& config() const { return cfg_; }

  // The uniform at (seed, stream, step, lane), in [0, 1).
  double uniform(uint64_t stream, uint32_t step, uint32_t lane = kLaneToken) const {
    return philox_uniform(cfg_.seed, stream, step, lane);
  }

  // The next token for logits [n]; greedy ignores (stream, step).
  int32_t sample(const float* logits, int32_t n, uint64_t stream, uint32_t step) const;

 private:
  SamplerConfig cfg_;
};

}  // namespace ssd
