#include "topology/sim/acceptance_model.h"

#include <algorithm>
#include <cmath>

#include "runtime/core/error.h"

namespace ssd::sim {

void AcceptanceParams::validate() const {
  SSD_CHECK(a >= 0 && a <= 1, "acceptance rate must be in [0, 1] (got {})", a);
  for (double v : per_position)
    SSD_CHECK(v >= 0 && v <= 1, "per-position acceptance must be in [0, 1] (got {})", v);
  SSD_CHECK(miss_at_1 >= 0 && miss_at_1 <= 1, "miss rate at fan-out 1 must be in [0, 1] (got {})",
            miss_at_1);
  SSD_CHECK(r > 0, "power-law exponent r must be > 0 (got {})", r);
}

double AcceptanceParams::at(int32_t position) const {
  if (per_position.empty()) return a;
  const size_t i = static_cast<size_t>(std::max(1, position)) - 1;
  return per_position[std::min(i, per_position.size() - 1)];
}

double AcceptanceParams::mean(int32_t k) const {
  double s = 0;
  for (int32_t i = 1; i <= k; ++i) s += at(i);
  return k > 0 ? s / k : a;
}

std::vector<double> AcceptanceParams::outcome_probs(int32_t k) const {
  std::vector<double> p(static_cast<size_t>(k) + 1);
  double reach = 1;  // P(the first i tokens were accepted)
  for (int32_t i = 0; i < k; ++i) {
    p[i] = reach * (1 - at(i + 1));
    reach *= at(i + 1);
  }
  p[k] = reach;
  return p;
}

double AcceptanceParams::expected_tokens(int32_t k) const {
  const std::vector<double> p = outcome_probs(k);
  double e = 0;
  for (size_t i = 0; i < p.size(); ++i) e += static_cast<double>(i + 1) * p[i];
  return e;
}

double AcceptanceParams::miss_rate(double fan_out) const {
  if (fan_out < 1) return 1;
  return std::clamp(miss_at_1 * std::pow(fan_out, -r), 0.0, 1.0);
}

double AcceptanceParams::hit_rate(std::span<const int32_t> fan_out) const {
  const int32_t k = static_cast<int32_t>(fan_out.size()) - 1;
  SSD_CHECK(k >= 0, "a fan-out plan needs at least one position");
  const std::vector<double> p = outcome_probs(k);
  double h = 0;
  for (int32_t i = 0; i <= k; ++i) h += p[i] * (1 - miss_rate(fan_out[i]));
  return h;
}

int32_t AcceptanceParams::sample_accepted(int32_t k, std::mt19937_64& rng) const {
  std::uniform_real_distribution<double> u(0, 1);
  int32_t n = 0;
  while (n < k && u(rng) < at(n + 1)) ++n;
  return n;
}

int32_t AcceptanceParams::sample_bonus_rank(std::mt19937_64& rng) const {
  // P(rank >= j) = m1 j^-r for j >= 1: the rank is the largest j with u < m1 j^-r.
  std::uniform_real_distribution<double> u01(0, 1);
  const double u = u01(rng);
  if (u >= miss_at_1) return 0;
  const double x = std::pow(miss_at_1 / std::max(u, 1e-300), 1.0 / r);
  return static_cast<int32_t>(std::min(std::ceil(x) - 1, double(1 << 20)));
}

double acceptance_for_mean_tokens(double mean_tokens, int32_t k) {
  SSD_CHECK(k >= 1, "draft length must be >= 1 (got {})", k);
  if (mean_tokens <= 1) return 0;
  if (mean_tokens >= k + 1) return 1;
  double lo = 0, hi = 1;
  for (int i = 0; i < 60; ++i) {
    const double mid = 0.5 * (lo + hi);
    AcceptanceParams p;
    p.a = mid;
    (p.expected_tokens(k) < mean_tokens ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

}  // namespace ssd::sim
