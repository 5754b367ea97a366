// SiLU and SwiGLU (see ops_pointwise.h). silu'(x) = s (1 + x (1 - s)), s = sigmoid(x).
#include "runtime/train/ops_pointwise.h"

namespace ssd::train {

void silu_forward(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * sigmoidf(x[i]);
}

void silu_backward(const float* dy, const float* x, float* dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float s = sigmoidf(x[i]);
    dx[i] += dy[i] * s * (1.0f + x[i] * (1.0f - s));
  }
}

void swiglu_forward(const float* gate, const float* up, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = gate[i] * sigmoidf(gate[i]) * up[i];
}

void swiglu_backward(const float* dy, const float* gate, const float* up, float* dgate,
                     float* dup, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float s = sigmoidf(gate[i]);
    dgate[i] += dy[i] * up[i] * s * (1.0f + gate[i] * (1.0f - s));
    dup[i] += dy[i] * gate[i] * s;
  }
}

}  // namespace ssd::train
