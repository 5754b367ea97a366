// Saguaro sampling ("Speculative Speculative Decoding"): the drafter draws its token at a position
// whose fan-out is F from
//
//   sigma_{F,C}(q)(x) = C q(x) / Z  for x among the top F of q,   q(x) / Z  otherwise,
//   Z = 1 - (1 - C) * (mass of the top F),                          C in (0, 1],
//
// and the draft node carries sigma_{F,C}(q) as its q. Verification accepts with min(1, p / q') and
// resamples from max(0, p - q'), which is exact for ANY q' the token really was drawn from, so the
// output distribution is unchanged. What changes is where the rejection mass goes: lowering the
// top-F tokens' q raises p - q' on exactly those tokens, so a rejected position's bonus token
// lands more often among the F tokens the outcome predictor pre-speculated for (a higher cache
// hit rate), at the price of a lower acceptance rate (q' moved away from p). C = 1 is the
// identity; greedy drafting (argmax) is unaffected.
//
// "Top F" is the first F entries of q in process() order (probability descending, then id), so
// ties at the boundary go to the lower id. The reshaped list is re-sorted into that order.
//
// This file also holds what logits-based drafters report as DraftTree::predicted (the
// alternatives at a position, before any reshape), so that every drafter ranks them alike:
//   sampling: the first N entries of the processed q (probabilities as in q, not renormalised);
//   greedy:   the N largest logits, softmax at temperature 1 renormalised over those N (only the
//             ranking is used; a full softmax over the vocabulary would cost a pass of exp).
#pragma once

#include <cstdint>

#include "runtime/sampling/sampler.h"
#include "runtime/spec/drafter.h"

namespace ssd {

// sigma_{top_f, c}(q). top_f <= 0, top_f >= q.size() (every entry scaled alike) or c == 1 return
// q unchanged. Throws ssd::Error for c outside (0, 1].
ProcessedDist saguaro_reshape(const ProcessedDist& q, int32_t top_f, double c);

// The F request `r` gives the token at `depth` (1 = a child of the root); 0 when off (c == 1,
// greedy, or past the list).
int32_t saguaro_top_f_at(const DraftRequest& r, int32_t depth);

// q <- sigma_{F, r.saguaro_c}(q) with F = saguaro_top_f_at(r, depth).
void apply_saguaro(const DraftRequest& r, int32_t depth, ProcessedDist& q);

// The first n entries of d (its n likeliest), not renormalised.
ProcessedDist top_entries(const ProcessedDist& d, int32_t n);

// The n largest logits, softmax at temperature 1 renormalised over them. logits: [vocab].
ProcessedDist top_of_logits(const float* logits, int32_t vocab, int32_t n);

// DraftTree::predicted of a node drafted from `logits` for request r (empty when r.predict_top
// is 0). `processed` is the q before any reshape (ignored when greedy).
ProcessedDist predicted_for(const DraftRequest& r, const float* logits, int32_t vocab,
                            const ProcessedDist& processed);

}  // namespace ssd
