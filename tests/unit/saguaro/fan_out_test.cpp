// Fan-out math (runtime/saguaro/fan_out.h): apportionment sums to the budget, the geometric plan
// follows the SSD paper's ratios (decreasing in k, the last position boosted), the a_p estimator
// recovers a known acceptance rate and the power-law fit recovers a known exponent.
//
// Tolerances: weight ratios are closed-form pow() expressions, equal to 1e-12 relative; the
// estimators are checked on data with known parameters (see each test for the error budget).
#include "runtime/saguaro/fan_out.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <random>

#include "runtime/core/error.h"

namespace ssd {
namespace {

int32_t sum(const std::vector<int32_t>& v) { return std::accumulate(v.begin(), v.end(), 0); }

TEST(FanOut, ApportionSumsToTheBudgetAndIsNonNegative) {
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> w(0.0, 3.0);
  for (int trial = 0; trial < 500; ++trial) {
    const size_t n = 1 + trial % 9;
    std::vector<double> weights(n);
    for (double& x : weights) x = trial % 7 == 0 ? 0.0 : w(rng);
    weights[trial % n] += 0.01;  // at least one positive weight
    const int32_t budget = trial % 40;
    const std::vector<int32_t> f = apportion(weights, budget);
    ASSERT_EQ(f.size(), n);
    EXPECT_EQ(sum(f), budget);
    for (size_t i = 0; i < n; ++i) {
      EXPECT_GE(f[i], 0);
      // Largest remainder never strays more than one from the exact share.
      const double exact =
          budget * weights[i] / std::accumulate(weights.begin(), weights.end(), 0.0);
      EXPECT_LT(std::abs(f[i] - exact), 1.0) << "entry " << i << " of trial " << trial;
    }
  }
  EXPECT_EQ(apportion(std::vector<double>{0, 0}, 5), (std::vector<int32_t>{0, 0}));
}

TEST(FanOut, ConstantSplitsEvenlyWithTheRemainderToTheLowestK) {
  EXPECT_EQ(constant_fan_out(4, 8), (std::vector<int32_t>{2, 2, 2, 1, 1}));
  EXPECT_EQ(constant_fan_out(2, 6), (std::vector<int32_t>{2, 2, 2}));
  EXPECT_EQ(constant_fan_out(3, 2), (std::vector<int32_t>{1, 1, 0, 0}));
}

TEST(FanOut, GeometricWeightsFollowTheSeedRatios) {
  for (const double a : {0.3, 0.6, 0.85}) {
    for (const double r : {0.2, 0.5, 2.0}) {
      const int32_t K = 5;
      const std::vector<double> w = geometric_weights(K, a, r);
      ASSERT_EQ(w.size(), 6u);
      EXPECT_DOUBLE_EQ(w[0], 1.0);
      const double step = std::pow(a, 1.0 / (1.0 + r));
      for (int k = 1; k < K; ++k) EXPECT_NEAR(w[k] / w[k - 1], step, 1e-12 * step);
      const double boost = std::pow(1.0 - a, -1.0 / (1.0 + r));
      EXPECT_NEAR(w[K] / w[K - 1], step * boost, 1e-12 * step * boost);
    }
  }
}

TEST(FanOut, GeometricPlanIsMonotonicSumsToTheBudgetAndBoostsTheLastPosition) {
  for (const int32_t budget : {4, 8, 16, 64}) {
    for (const double a : {0.4, 0.7, 0.9}) {
      const int32_t K = 4;
      const std::vector<int32_t> f = geometric_fan_out(K, budget, a, 0.5);
      EXPECT_EQ(sum(f), budget);
      for (int k = 1; k < K; ++k) EXPECT_LE(f[k], f[k - 1]) << "a " << a << " budget " << budget;
    }
  }
  // a = 0.8, r = 0.5: w = 1, .862, .743, .640, .552 * 2.924 = 1.615 (sum 4.857); budget 100
  // gives the exact shares 20.6, 17.7, 15.3, 13.2, 33.2, so the boosted F_4 is the largest.
  const std::vector<int32_t> f = geometric_fan_out(4, 100, 0.8, 0.5);
  EXPECT_EQ(f, (std::vector<int32_t>{21, 18, 15, 13, 33}));
  // A high acceptance rate sends most of the budget to the last position.
  const std::vector<int32_t> g = geometric_fan_out(4, 10, 0.99, 0.5);
  EXPECT_GE(g[4], 8);
}

TEST(FanOutEstimator, AcceptanceRateOfAGeometricProcess) {
  FanOutEstimator est(0.7, 0.5);
  EXPECT_DOUBLE_EQ(est.a_p(), 0.7);  // no data: the default
  std::mt19937_64 rng(11);
  std::bernoulli_distribution accept(0.6);
  const int32_t K = 4;
  for (int round = 0; round < 20000; ++round) {
    int32_t k = 0;
    while (k < K && accept(rng)) ++k;
    est.observe_round(K, k);
  }
  // ~46k Bernoulli trials: standard error sqrt(0.24 / 46000) = 0.0023; the prior's 4
  // pseudo-trials move it by < 1e-4. 0.01 is over 4 standard errors.
  EXPECT_NEAR(est.a_p(), 0.6, 0.01);
}

TEST(FanOutEstimator, PowerLawExponentFromExactCounts) {
  // Miss rate 0.8 F^-0.7 at F = 1, 2, 4, 8, with 20000 observations each and the exact counts of
  // misses (rounded to whole observations): the only errors are the rounding (< 1 / 20000) and
  // the fit's smoothing (+0.5 / +1), each under 1e-3 in log miss rate, so r is within 0.01.
  FanOutEstimator est(0.7, 0.5);
  for (const int32_t f : {1, 2, 4, 8}) {
    const int n = 20000;
    const int misses = static_cast<int>(std::lround(n * 0.8 * std::pow(f, -0.7)));
    for (int i = 0; i < n; ++i) est.observe_prediction(f, i >= misses);
  }
  const FanOutEstimator::Fit fit = est.fit_r();
  EXPECT_TRUE(fit.from_data);
  EXPECT_EQ(fit.groups, 4);
  EXPECT_NEAR(fit.r, 0.7, 0.01);
  EXPECT_NEAR(std::exp(fit.log_c), 0.8, 0.01);
}

TEST(FanOutEstimator, PowerLawExponentFromSampledHits) {
  // Bernoulli draws with miss rate 0.6 F^-0.4 at F = 1, 3, 6, 12, 5000 each: the log miss rates
  // have standard errors 0.009 to 0.02, giving a slope error of about 0.015; 0.06 is 4 of them.
  FanOutEstimator est(0.7, 0.5);
  std::mt19937_64 rng(3);
  for (const int32_t f : {1, 3, 6, 12}) {
    std::bernoulli_distribution miss(0.6 * std::pow(f, -0.4));
    for (int i = 0; i < 5000; ++i) est.observe_prediction(f, !miss(rng));
  }
  EXPECT_NEAR(est.r(), 0.4, 0.06);
}

TEST(FanOutEstimator, DefaultExponentUntilTwoGroupsHaveData) {
  FanOutEstimator est(0.7, 0.5);
  EXPECT_DOUBLE_EQ(est.r(), 0.5);
  for (int i = 0; i < 100; ++i) est.observe_prediction(2, i % 2 == 0);
  EXPECT_DOUBLE_EQ(est.r(), 0.5);  // one F value: no slope
  for (int i = 0; i < 7; ++i) est.observe_prediction(4, true);
  EXPECT_DOUBLE_EQ(est.r(), 0.5);    // 7 < 8 observations: the group does not count yet
  est.observe_prediction(0, false);  // F = 0 is ignored
  est.observe_prediction(4, true);
  EXPECT_FALSE(est.r() == 0.5);
  EXPECT_TRUE(est.fit_r().from_data);
}

TEST(FanOutPlanner, ModesAndLists) {
  FanOutOptions o;
  o.mode = FanOutMode::kConstant;
  o.budget = 8;
  EXPECT_EQ(FanOutPlanner(o, 4).plan(4, true), (std::vector<int32_t>{2, 2, 2, 1, 1}));

  o.mode = FanOutMode::kGeometric;
  o.estimate = false;
  o.a_p = 0.8;
  o.r = 0.5;
  o.budget = 100;
  EXPECT_EQ(FanOutPlanner(o, 4).plan(4, false), geometric_fan_out(4, 100, 0.8, 0.5));

  // Estimated: the planner follows its estimator.
  o.estimate = true;
  FanOutPlanner p(o, 4);
  for (int i = 0; i < 1000; ++i) p.estimator().observe_round(4, 4);  // everything accepted
  EXPECT_GT(p.a_p(), 0.99);
  EXPECT_EQ(p.plan(4, true), geometric_fan_out(4, 100, p.a_p(), p.r()));

  o.mode = FanOutMode::kLists;
  o.after_hit = {1, 1, 2, 4};
  o.after_miss = {5, 2, 1, 0};
  FanOutPlanner l(o, 3);
  EXPECT_EQ(l.plan(3, true), o.after_hit);
  EXPECT_EQ(l.plan(3, false), o.after_miss);
  EXPECT_EQ(l.plan(1, true), (std::vector<int32_t>{1, 7}));  // cut: the rest goes to the last
}

TEST(FanOutPlanner, RefusesBadOptions) {
  FanOutOptions o;
  o.mode = FanOutMode::kLists;
  o.after_hit = {1, 2};
  o.after_miss = {1, 2, 3};
  try {
    FanOutPlanner p(o, 2);
    FAIL() << "a short list was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("after a hit"), std::string::npos) << e.what();
  }
  o.after_hit = {1, -1, 0};
  EXPECT_THROW(FanOutPlanner(o, 2), Error);
  FanOutOptions g;
  g.a_p = 1.0;
  EXPECT_THROW(FanOutPlanner(g, 2), Error);
  g.a_p = 0.5;
  g.budget = -1;
  EXPECT_THROW(FanOutPlanner(g, 2), Error);
  EXPECT_THROW(FanOutPlanner(FanOutOptions{}, 0), Error);
}

}  // namespace
}  // namespace ssd
