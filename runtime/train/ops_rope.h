// NeoX rotary embedding (rotate halves over the whole head_dim, as the Domino drafter's
// backbone: domino_config.h) for the trainer. The rotation is orthogonal, so the backward is the
// same rotation by the negated angle. Angles are computed exactly as the runtime's kernel does
// (pos * inv_freq in float64, cos/sin rounded to float).
#pragma once

#include <cstdint>
#include <vector>

namespace ssd::train {

// inv_freq[i] = theta^(-2i / head_dim), i < head_dim / 2, in float as the backbone computes it.
std::vector<float> rope_inv_freq(float theta, int64_t head_dim);

// x: [n, heads, head_dim], row r at position pos[r]; rotated in place. inverse = true rotates by
// -angle (the backward: dx = R^T dy).
void rope_apply(float* x, const int32_t* pos, int64_t n, int64_t heads, int64_t head_dim,
                const float* inv_freq, bool inverse = false);

}  // namespace ssd::train
