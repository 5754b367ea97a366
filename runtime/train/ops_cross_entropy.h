// Softmax cross-entropy of one logits row for the trainer, with its gradient folded in: the loss
// weights are known before the backward (position weight, curriculum lambda, 1 / blocks), so the
// forward writes d(weight * CE)/dz directly and no probabilities are kept.
#pragma once

#include <cstdint>

namespace ssd::train {

// Returns CE = logsumexp(z) - z[label] (float64 sums). When dz is non-null ADDS
// weight * (softmax(z) - onehot(label)) into dz[0, n). label must be in [0, n).
double cross_entropy(const float* z, int64_t n, int64_t label, float weight, float* dz);

// Index of the largest entry (first on ties, as the runtime's argmax).
int64_t argmax_row(const float* z, int64_t n);

}  // namespace ssd::train
