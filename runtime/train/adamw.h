// AdamW with the run's learning-rate schedule and global-norm clipping, over the flat parameter
// buffer (domino_params.h): beta1 0.9, beta2 0.95, eps 1e-8, decoupled weight decay on matrices
// only (ParamTensor::decay). Schedule: linear warm-up from 0 over warmup_steps, then cosine decay
// from lr to 0.1 * lr at total_steps.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/train/domino_params.h"

namespace ssd::train {

struct AdamWOptions {
  double lr = 3e-4, beta1 = 0.9, beta2 = 0.95, eps = 1e-8, weight_decay = 0.01, clip = 1.0;
  int64_t warmup_steps = 0, total_steps = 1;
};

double lr_at(const AdamWOptions& o, int64_t step);  // step counts from 0

class AdamW {
 public:
  AdamW(const ParamLayout& layout, const AdamWOptions& opts);
  // One update at `step` (0-based): clips grads in place to the global norm `clip`, updates
  // params and the moments. Returns the gradient norm before clipping.
  double step(float* params, float* grads, int64_t step);
  std::vector<float>& m() { return m_; }
  std::vector<float>& v() { return v_; }

 private:
  const ParamLayout& layout_;
  AdamWOptions o_;
  std::vector<float> m_, v_;
};

}  // namespace ssd::train
