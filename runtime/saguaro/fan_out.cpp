#include "runtime/saguaro/fan_out.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "runtime/core/error.h"

namespace ssd {
namespace {

constexpr double kPriorTrials = 4;  // pseudo-trials of the a_p prior
constexpr int64_t kMinGroup = 8;    // observations an F value needs to enter the r fit
constexpr double kMinR = 0.05, kMaxR = 4;
constexpr double kMinA = 0.01, kMaxA = 0.99;

}  // namespace

std::vector<int32_t> apportion(std::span<const double> weights, int32_t budget) {
  SSD_CHECK(budget >= 0, "fan-out: budget {} must not be negative", budget);
  const size_t n = weights.size();
  std::vector<int32_t> out(n, 0);
  double total = 0;
  for (double w : weights) {
    SSD_CHECK(std::isfinite(w) && w >= 0, "fan-out: weight {} must be finite and >= 0", w);
    total += w;
  }
  if (n == 0 || total <= 0) return out;
  std::vector<double> frac(n);
  int64_t given = 0;
  for (size_t i = 0; i < n; ++i) {
    const double x = budget * weights[i] / total;
    out[i] = static_cast<int32_t>(std::floor(x));
    frac[i] = x - out[i];
    given += out[i];
  }
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return frac[a] > frac[b]; });  // ties: lower k
  for (size_t j = 0; given < budget; ++j, ++given) out[order[j % n]]++;
  return out;
}

std::vector<int32_t> constant_fan_out(int32_t k, int32_t budget) {
  SSD_CHECK(k >= 0, "fan-out: K = {} must not be negative", k);
  const std::vector<double> w(static_cast<size_t>(k) + 1, 1.0);
  return apportion(w, budget);
}

std::vector<double> geometric_weights(int32_t k, double a_p, double r) {
  SSD_CHECK(k >= 0, "fan-out: K = {} must not be negative", k);
  SSD_CHECK(std::isfinite(a_p) && std::isfinite(r) && r >= 0,
            "fan-out: a_p = {} and r = {} must be finite, r >= 0", a_p, r);
  const double a = std::clamp(a_p, kMinA, kMaxA);
  const double e = 1.0 / (1.0 + r);
  std::vector<double> w(static_cast<size_t>(k) + 1);
  for (int32_t i = 0; i <= k; ++i) w[i] = std::pow(a, i * e);
  w[k] *= std::pow(1.0 - a, -e);
  return w;
}

std::vector<int32_t> geometric_fan_out(int32_t k, int32_t budget, double a_p, double r) {
  const std::vector<double> w = geometric_weights(k, a_p, r);
  return apportion(w, budget);
}

FanOutEstimator::FanOutEstimator(double a_default, double r_default)
    : a_default_(a_default), r_default_(r_default) {}

void FanOutEstimator::observe_round(int32_t offered, int32_t accepted) {
  if (offered <= 0) return;
  SSD_CHECK(accepted >= 0 && accepted <= offered,
            "fan-out estimator: {} accepted of {} offered tokens", accepted, offered);
  successes_ += accepted;
  trials_ += std::min(accepted + 1, offered);
}

void FanOutEstimator::observe_prediction(int32_t fan_out, bool hit) {
  if (fan_out <= 0) return;
  auto& [n, hits] = by_f_[fan_out];
  n++;
  hits += hit ? 1 : 0;
}

double FanOutEstimator::a_p() const {
  return (static_cast<double>(successes_) + kPriorTrials * a_default_) /
         (static_cast<double>(trials_) + kPriorTrials);
}

FanOutEstimator::Fit FanOutEstimator::fit_r() const {
  double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  Fit f;
  for (const auto& [fan, obs] : by_f_) {
    const auto [n, hits] = obs;
    if (n < kMinGroup) continue;
    const double m = (static_cast<double>(n - hits) + 0.5) / (static_cast<double>(n) + 1.0);
    const double x = std::log(static_cast<double>(fan)), y = std::log(m),
                 w = static_cast<double>(n);
    sw += w;
    sx += w * x;
    sy += w * y;
    sxx += w * x * x;
    sxy += w * x * y;
    f.groups++;
  }
  const double den = sw * sxx - sx * sx;
  if (f.groups < 2 || den <= 0) {
    f.r = r_default_;
    return f;
  }
  const double slope = (sw * sxy - sx * sy) / den;
  f.log_c = (sy - slope * sx) / sw;
  f.r = std::clamp(-slope, kMinR, kMaxR);
  f.from_data = true;
  return f;
}

FanOutPlanner::FanOutPlanner(const FanOutOptions& opts, int32_t k)
    : opts_(opts), k_(k), est_(opts.a_p, opts.r) {
  SSD_CHECK(k >= 1, "fan-out: K = {} must be at least 1", k);
  SSD_CHECK(opts.budget >= 0 && opts.budget <= 1024, "--fan-out budget {} must be in 0..1024",
            opts.budget);
  SSD_CHECK(std::isfinite(opts.a_p) && opts.a_p > 0 && opts.a_p < 1,
            "fan-out: a_p = {} must be in (0, 1)", opts.a_p);
  SSD_CHECK(std::isfinite(opts.r) && opts.r > 0, "fan-out: r = {} must be positive", opts.r);
  if (opts.mode == FanOutMode::kLists) {
    for (const auto* list : {&opts.after_hit, &opts.after_miss}) {
      const char* which = list == &opts.after_hit ? "after a hit" : "after a miss";
      SSD_CHECK(list->size() == static_cast<size_t>(k) + 1,
                "fan-out list {} has {} entries; K = {} needs K + 1 = {}", which, list->size(), k,
                k + 1);
      for (int32_t f : *list)
        SSD_CHECK(f >= 0 && f <= 1024, "fan-out list {}: F = {} must be in 0..1024", which, f);
    }
  }
}

double FanOutPlanner::a_p() const { return opts_.estimate ? est_.a_p() : opts_.a_p; }
double FanOutPlanner::r() const { return opts_.estimate ? est_.r() : opts_.r; }

std::vector<int32_t> FanOutPlanner::plan(int32_t k, bool after_hit) const {
  SSD_CHECK(k >= 0 && k <= k_, "fan-out: plan for {} tokens, configured K = {}", k, k_);
  switch (opts_.mode) {
    case FanOutMode::kConstant:
      return constant_fan_out(k, opts_.budget);
    case FanOutMode::kGeometric:
      return geometric_fan_out(k, opts_.budget, a_p(), r());
    case FanOutMode::kLists: {
      std::vector<int32_t> f = after_hit ? opts_.after_hit : opts_.after_miss;
      for (size_t i = static_cast<size_t>(k) + 1; i < f.size(); ++i) f[k] += f[i];
      f.resize(static_cast<size_t>(k) + 1);
      return f;
    }
  }
  return {};
}

}  // namespace ssd
