// One GRU step for the trainer, PyTorch nn.GRU convention (domino_head.h): gate rows ordered
// reset | update | new,
//   r = sigmoid(W_ir x + b_ir + W_hr s + b_hr),  z = sigmoid(W_iz x + b_iz + W_hz s + b_hz),
//   n = tanh(W_in x + b_in + r * (W_hn s + b_hn)),  s' = (1 - z) * n + z * s.
// The forward keeps the pre-activations gi = W_i x + b_i and gh = W_h s + b_h for the backward.
#pragma once

#include <cstdint>
#include <vector>

namespace ssd::train {

struct GruWeights {
  const float* w_ih = nullptr;  // [3g, d]
  const float* w_hh = nullptr;  // [3g, g]
  const float* b_ih = nullptr;  // [3g]
  const float* b_hh = nullptr;  // [3g]
};
struct GruGrads {
  float* w_ih = nullptr;
  float* w_hh = nullptr;
  float* b_ih = nullptr;
  float* b_hh = nullptr;
};

// The saved state of one batched step of n rows.
struct GruStepCache {
  std::vector<float> x;      // [n, d]  inputs
  std::vector<float> s;      // [n, g]  previous states
  std::vector<float> gi, gh; // [n, 3g]
};

// s_out[n, g] = GRU(s_in, x). s_out may not alias s_in.
void gru_forward(const GruWeights& w, const float* x, const float* s_in, float* s_out, int64_t n,
                 int64_t d, int64_t g, GruStepCache& cache);
// Given ds_out, ADDS parameter gradients into gr, and writes ds_in[n, g] (overwritten) and, when
// dx is non-null, adds dx[n, d].
void gru_backward(const GruWeights& w, const GruStepCache& cache, const float* ds_out,
                  float* ds_in, float* dx, GruGrads& gr, int64_t n, int64_t d, int64_t g);

}  // namespace ssd::train
