// AdamW, schedule and clipping (see adamw.h).
#include "runtime/train/adamw.h"

#include <algorithm>
#include <cmath>

namespace ssd::train {

double lr_at(const AdamWOptions& o, int64_t step) {
  if (step < o.warmup_steps) return o.lr * static_cast<double>(step + 1) / o.warmup_steps;
  const double span = std::max<int64_t>(1, o.total_steps - o.warmup_steps);
  const double t = std::min(1.0, static_cast<double>(step - o.warmup_steps) / span);
  return o.lr * (0.1 + 0.9 * 0.5 * (1.0 + std::cos(3.141592653589793 * t)));
}

AdamW::AdamW(const ParamLayout& layout, const AdamWOptions& opts)
    : layout_(layout), o_(opts), m_(layout.total(), 0.0f), v_(layout.total(), 0.0f) {}

double AdamW::step(float* params, float* grads, int64_t step) {
  const int64_t n = layout_.total();
  double ss = 0;
  for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(grads[i]) * grads[i];
  const double norm = std::sqrt(ss);
  if (o_.clip > 0 && norm > o_.clip) {
    const float s = static_cast<float>(o_.clip / norm);
    for (int64_t i = 0; i < n; ++i) grads[i] *= s;
  }
  const double lr = lr_at(o_, step);
  const double t = static_cast<double>(step + 1);
  const float b1 = static_cast<float>(o_.beta1), b2 = static_cast<float>(o_.beta2);
  const float c1 = static_cast<float>(1.0 / (1.0 - std::pow(o_.beta1, t)));
  const float c2 = static_cast<float>(1.0 / (1.0 - std::pow(o_.beta2, t)));
  const float eps = static_cast<float>(o_.eps), flr = static_cast<float>(lr);
  for (const ParamTensor& pt : layout_.tensors()) {
    const float wd = pt.decay ? static_cast<float>(o_.weight_decay) : 0.0f;
    for (int64_t i = pt.offset; i < pt.offset + pt.size; ++i) {
      const float g = grads[i];
      m_[i] = b1 * m_[i] + (1.0f - b1) * g;
      v_[i] = b2 * v_[i] + (1.0f - b2) * g * g;
      const float upd = (m_[i] * c1) / (std::sqrt(v_[i] * c2) + eps);
      params[i] -= flr * (upd + wd * params[i]);
    }
  }
  return norm;
}

}  // namespace ssd::train
