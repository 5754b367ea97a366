// Elementwise activations for the trainer: SiLU (the Domino head's bottleneck) and SwiGLU
// (silu(gate) * up, the backbone's MLP), forward and backward.
#pragma once

#include <cstdint>

namespace ssd::train {

inline float sigmoidf(float x) { return 1.0f / (1.0f + __builtin_expf(-x)); }

// y = x * sigmoid(x)   (y may alias x only in the forward)
void silu_forward(const float* x, float* y, int64_t n);
// dx += dy * silu'(x)
void silu_backward(const float* dy, const float* x, float* dx, int64_t n);

// y = silu(gate) * up
void swiglu_forward(const float* gate, const float* up, float* y, int64_t n);
// dgate += dy * up * silu'(gate), dup += dy * silu(gate)
void swiglu_backward(const float* dy, const float* gate, const float* up, float* dgate,
                     float* dup, int64_t n);

}  // namespace ssd::train
