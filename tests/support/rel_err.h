// The comparison every numeric test of the engine states its tolerance in: relative error =
// max_i |a_i - b_i| / max_i |b_i| over the compared values (b is the reference). Scale-free, and
// dominated by the largest logits, which are the ones that decide tokens.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

namespace ssd::test {

inline double rel_err(const float* a, const std::vector<double>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    num = std::max(num, std::abs(a[i] - b[i]));
    den = std::max(den, std::abs(b[i]));
  }
  return num / den;
}

inline double rel_err(const float* a, const float* b, size_t n) {
  return rel_err(a, std::vector<double>(b, b + n));
}

inline double rel_err(const std::vector<float>& a, const std::vector<float>& b) {
  return rel_err(a.data(), b.data(), std::min(a.size(), b.size()));
}

}  // namespace ssd::test
