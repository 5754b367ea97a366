// NeoX RoPE forward and its transpose (see ops_rope.h).
#include "runtime/train/ops_rope.h"

#include <cmath>

namespace ssd::train {

std::vector<float> rope_inv_freq(float theta, int64_t head_dim) {
  std::vector<float> f(head_dim / 2);
  for (int64_t i = 0; i < head_dim / 2; ++i)
    f[i] = static_cast<float>(
        std::pow(static_cast<double>(theta), -2.0 * static_cast<double>(i) / head_dim));
  return f;
}

void rope_apply(float* x, const int32_t* pos, int64_t n, int64_t heads, int64_t head_dim,
                const float* inv_freq, bool inverse) {
  const int64_t half = head_dim / 2;
  std::vector<float> c(half), s(half);
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t i = 0; i < half; ++i) {
      const double theta = static_cast<double>(pos[r]) * static_cast<double>(inv_freq[i]);
      c[i] = static_cast<float>(std::cos(theta));
      s[i] = static_cast<float>(std::sin(theta));
      if (inverse) s[i] = -s[i];
    }
    for (int64_t h = 0; h < heads; ++h) {
      float* p = x + (r * heads + h) * head_dim;
      for (int64_t i = 0; i < half; ++i) {
        const float a = p[i], b = p[i + half];
        p[i] = a * c[i] - b * s[i];
        p[i + half] = a * s[i] + b * c[i];
      }
    }
  }
}

}  // namespace ssd::train
