// Finite-difference gradient checks for the trainer's float32 ops.
//
// Every check uses a scalar objective J = sum_k c_k y_k (fixed random c, summed in float64) and
// compares the analytic dJ/dx of chosen inputs with central differences (J(x+h) - J(x-h)) / 2h.
// Tolerance: |fd - an| <= rel * |an| + abs. With float32 ops, h = 1e-2 and O(1) values, the
// truncation error is ~h^2 = 1e-4 relative and the rounding error ~1e-7 * sum|c y| / h, about
// 1e-4 of the objective's scale; rel = 2e-2 and abs = 2e-3 bound both with a wide margin, while
// a real bug (a missing term, a wrong sign or index) is off by O(1) relative and fails.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace ssd::train::test {

inline std::vector<float> randv(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

inline double dotd(const std::vector<float>& c, const float* y) {
  double s = 0;
  for (size_t i = 0; i < c.size(); ++i) s += static_cast<double>(c[i]) * y[i];
  return s;
}

struct FdTolerance {
  double h = 1e-2, rel = 2e-2, abs = 2e-3;
};

// Checks every entry of x (or `max_checks` spread entries) against grad.
inline void fd_check(const std::string& what, std::vector<float>& x, const std::vector<float>& grad,
                     const std::function<double()>& objective, FdTolerance tol = {},
                     size_t max_checks = 24) {
  ASSERT_EQ(x.size(), grad.size()) << what;
  const size_t step = std::max<size_t>(1, x.size() / max_checks);
  int nonzero = 0;
  for (size_t i = 0; i < x.size(); i += step) {
    const float keep = x[i];
    x[i] = keep + static_cast<float>(tol.h);
    const double jp = objective();
    x[i] = keep - static_cast<float>(tol.h);
    const double jm = objective();
    x[i] = keep;
    const double fd = (jp - jm) / (2 * tol.h);
    EXPECT_NEAR(grad[i], fd, tol.rel * std::fabs(fd) + tol.abs) << what << " index " << i;
    nonzero += std::fabs(fd) > 10 * tol.abs;
  }
  // A check whose gradients are all ~0 proves nothing.
  EXPECT_GT(nonzero, 0) << what << ": every checked gradient is ~0";
}

}  // namespace ssd::train::test
