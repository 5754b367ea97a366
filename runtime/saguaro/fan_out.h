// Fan-out: how many branches Saguaro pre-speculates at each verification outcome position.
//
// A speculation of K tokens ends in one of K + 1 outcomes k = 0..K (tokens accepted), each with a
// bonus token. F_k is the number of bonus tokens pre-speculated for outcome k; the cache hits when
// the real bonus is among them. Under a per-position acceptance rate a_p, P(k) = a_p^k (1 - a_p)
// for k < K and P(K) = a_p^K. If the miss rate at fan-out F follows a power law,
//     P(bonus not among the F predicted | k) = c F^(-r),
// maximising sum_k P(k) (1 - c F_k^(-r)) subject to sum_k F_k = budget gives (Lagrange)
// F_k proportional to P(k)^(1 / (1 + r)), i.e. the SSD paper's geometric fan-out:
//     F_k = F_0 a_p^(k / (1 + r))                          k < K
//     F_K = F_0 a_p^(K / (1 + r)) (1 - a_p)^(-1 / (1 + r))  (the last position is boosted: it is
//                                                            reached with a_p^K, not a_p^K (1-a_p))
// a_p is clamped to [0.01, 0.99] (at 1 the boost is infinite, at 0 every F_k past 0 vanishes).
//
// Plans (FanOutOptions::mode):
//   constant   the budget split evenly over the K + 1 positions (remainder to the lowest k);
//   geometric  the weights above, a_p and r fixed or estimated online (FanOutEstimator);
//   lists      explicit per-position lists of K + 1 entries, one for the rounds after a cache hit
//              and one for the rounds after a miss (the speculation then came from a fallback).
// Weights become integers by largest remainder (Hamilton): floor(budget * w_k / sum w), then one
// more to the largest fractional parts (ties to the lower k). The result sums to the budget, every
// F_k >= 0, and F_0 >= F_1 >= ... >= F_{K-1} whenever the weights are non-increasing there.
//
// Online estimates (FanOutEstimator):
//   a_p  successes / trials over every round: a round that accepted k of K' offered tokens is
//        min(k + 1, K') Bernoulli trials with k successes (acceptance stops at the first reject:
//        the maximum-likelihood estimate of a geometric stopping rate), with a prior of 4
//        pseudo-trials at the default a_p so the first rounds do not swing the plan to an extreme.
//   r    the power law fitted from the run's own (F, hit) observations (F = the fan-out at the
//        outcome position that occurred, hit = its bonus was pre-speculated): observations are
//        grouped by F; each group with n >= 8 gives the smoothed miss rate
//        m_F = (misses + 0.5) / (n + 1); r = -slope of the weighted least-squares line of
//        log m_F on log F (weights n). At least two groups are needed (otherwise the default r);
//        r is clamped to [0.05, 4] (a flat or rising miss rate says little about the exponent).
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <vector>

namespace ssd {

enum class FanOutMode { kConstant, kGeometric, kLists };

struct FanOutOptions {
  FanOutMode mode = FanOutMode::kGeometric;
  int32_t budget = 8;               // branches per sequence: sum of F_0..F_K (constant, geometric)
  std::vector<int32_t> after_hit;   // lists: [K + 1] F_k for rounds after a cache hit
  std::vector<int32_t> after_miss;  // lists: [K + 1] F_k for rounds after a miss
  bool estimate = true;             // geometric: a_p and r from the run (else the values below)
  double a_p = 0.7;                 // acceptance rate: fixed value, or the estimator's prior
  double r = 0.5;                   // power-law exponent: fixed value, or before any fit
};

// Largest-remainder apportionment of `budget` by non-negative weights (see the top of the file).
// All-zero weights give all zeros.
std::vector<int32_t> apportion(std::span<const double> weights, int32_t budget);

// [k + 1] entries summing to budget.
std::vector<int32_t> constant_fan_out(int32_t k, int32_t budget);
std::vector<int32_t> geometric_fan_out(int32_t k, int32_t budget, double a_p, double r);
// The geometric weights before rounding (F_0 = 1).
std::vector<double> geometric_weights(int32_t k, double a_p, double r);

class FanOutEstimator {
 public:
  FanOutEstimator(double a_default, double r_default);

  // A verified speculation: `offered` draft tokens, `accepted` of them accepted.
  void observe_round(int32_t offered, int32_t accepted);
  // The fan-out at the outcome position that occurred and whether its bonus was pre-speculated.
  // F = 0 is ignored (it cannot hit and has no logarithm).
  void observe_prediction(int32_t fan_out, bool hit);

  double a_p() const;
  struct Fit {
    double r = 0;
    double log_c = 0;        // intercept: log miss rate at F = 1
    int32_t groups = 0;      // F values with enough observations
    bool from_data = false;  // false: the default r (too few groups)
  };
  Fit fit_r() const;
  double r() const { return fit_r().r; }

  int64_t trials() const { return trials_; }
  int64_t successes() const { return successes_; }

 private:
  double a_default_, r_default_;
  int64_t trials_ = 0, successes_ = 0;
  std::map<int32_t, std::pair<int64_t, int64_t>> by_f_;  // F -> (observations, hits)
};

// The plan of FanOutOptions for a speculation of k tokens, with its estimator.
class FanOutPlanner {
 public:
  // Throws ssd::Error naming the option for a bad budget, a_p, r, or list (lists must have k + 1
  // non-negative entries; k is checked here because the lists' length depends on it).
  FanOutPlanner(const FanOutOptions& opts, int32_t k);

  // [k + 1]: F_0..F_k for a speculation of k tokens (k may be below the configured K near the end
  // of the context: the plan is made for that k; lists are cut to k + 1 entries, the cut mass
  // added to the last kept entry).
  std::vector<int32_t> plan(int32_t k, bool after_hit) const;

  const FanOutOptions& options() const { return opts_; }
  FanOutEstimator& estimator() { return est_; }
  const FanOutEstimator& estimator() const { return est_; }
  // The a_p and r the geometric plan uses now.
  double a_p() const;
  double r() const;

 private:
  FanOutOptions opts_;
  int32_t k_;
  FanOutEstimator est_;
};

}  // namespace ssd
