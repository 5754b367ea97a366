// Outcome prediction ("Speculative Speculative Decoding"): while the target verifies a speculation
// of K tokens, guess the outcomes it may return. An outcome is (k, bonus): k drafted tokens
// accepted, then the bonus token at position k (the correction drawn from the residual after
// rejecting token k, or, at k = K, the token after the whole speculation). For each k the predictor
// proposes the F_k likeliest bonus tokens under the drafter's distribution at position k
// (DraftTree::predicted of the drafted node at depth k + 1; the speculation's drafter drafted K + 1
// tokens so that position K has one too). For k < K the drafted token itself is skipped: a rejected
// token is never the bonus (greedy: the target's argmax differs from it; sampling: token x can be
// rejected only when q(x) > p(x), and then the residual max(0, p - q) the bonus is drawn from is 0
// at x).
//
// Output order: k ascending, then likeliest first. Positions without a ranking (a drafter that
// cannot rank alternatives, or a speculation cut short) get no predictions; a ranking shorter than
// F_k (+ 1 for the skipped token) gives what it has, so DraftRequest::predict_top should be at
// least max F_k + 1.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "runtime/sampling/sampler.h"

namespace ssd {

struct PredictedOutcome {
  int32_t k = 0;      // accepted tokens
  int32_t bonus = 0;  // the token after them
  double prob = 0;    // its weight in the drafter's ranking at position k
};

// tokens: [K] the speculation; predicted: [<= K + 1] ranked tokens per position; fan_out:
// [>= K + 1] F_k (entries past K are ignored; missing entries count as 0).
std::vector<PredictedOutcome> predict_outcomes(std::span<const int32_t> tokens,
                                               std::span<const ProcessedDist> predicted,
                                               std::span<const int32_t> fan_out);

}  // namespace ssd
