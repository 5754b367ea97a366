// The median of a window of measurements, the robust summary the runtime's online cost models
// share (the length policy's cost points, the pre-speculation switch's rates, the miss policy's
// round overhead): one stall in a window moves it no more than one ordinary sample would.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

namespace ssd {

// The median of `v` (taken by value: it is reordered); the mean of the two middle values for an
// even count; 0 for an empty window.
inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  const auto mid = static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), v.begin() + mid, v.end());
  const double hi = v[static_cast<size_t>(mid)];
  if (v.size() % 2 == 1) return hi;
  return (*std::max_element(v.begin(), v.begin() + mid) + hi) / 2;
}

}  // namespace ssd
