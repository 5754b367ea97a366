// The acceptance model and the fan-out against the SSD paper's formulas: expected tokens per
// round (1 - a^(K+1)) / (1 - a), the power-law miss rate, and the geometric fan-out
// F_k = F_0 a^(k / (1 + r)), F_K = F_0 a^(K / (1 + r)) (1 - a)^(-1 / (1 + r)).
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "runtime/core/error.h"
#include "runtime/saguaro/fan_out.h"
#include "topology/sim/acceptance_model.h"
#include "topology/sim/branch_plan.h"

namespace ssd::sim {
namespace {

TEST(Acceptance, ExpectedTokensIsTheCanonicalFormula) {
  for (double a : {0.3, 0.6, 0.8, 0.95})
    for (int32_t k : {1, 2, 4, 8}) {
      AcceptanceParams p;
      p.a = a;
      EXPECT_NEAR(p.expected_tokens(k), (1 - std::pow(a, k + 1)) / (1 - a), 1e-12);
      const std::vector<double> pk = p.outcome_probs(k);
      EXPECT_NEAR(std::accumulate(pk.begin(), pk.end(), 0.0), 1.0, 1e-12);
    }
}

TEST(Acceptance, SampledMeanMatchesTheFormula) {
  AcceptanceParams p;
  p.a = 0.7;
  std::mt19937_64 rng(7);
  double sum = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) sum += p.sample_accepted(4, rng) + 1;
  // Standard error of the mean is ~0.003 here; 0.02 is > 6 of them.
  EXPECT_NEAR(sum / n, p.expected_tokens(4), 0.02);
}

TEST(Acceptance, InverseOfExpectedTokens) {
  for (double a : {0.2, 0.5, 0.9}) {
    AcceptanceParams p;
    p.a = a;
    EXPECT_NEAR(acceptance_for_mean_tokens(p.expected_tokens(4), 4), a, 1e-9);
  }
  EXPECT_EQ(acceptance_for_mean_tokens(1.0, 4), 0.0);
}

TEST(PowerLaw, MissRateAndSampledRanksFollowIt) {
  AcceptanceParams p;
  p.miss_at_1 = 0.4;
  p.r = 0.7;
  for (double f : {1.0, 2.0, 4.0, 16.0}) EXPECT_NEAR(p.miss_rate(f), 0.4 * std::pow(f, -0.7), 1e-12);
  EXPECT_EQ(p.miss_rate(0), 1.0);
  std::mt19937_64 rng(3);
  const int n = 200000;
  std::vector<int> at_least(9, 0);
  for (int i = 0; i < n; ++i) {
    const int32_t j = p.sample_bonus_rank(rng);
    for (int f = 1; f <= 8; ++f) at_least[f] += j >= f;
  }
  // P(rank >= F) = miss(F); binomial standard error <= 0.0011, tolerance 0.006.
  for (int f : {1, 2, 4, 8}) EXPECT_NEAR(double(at_least[f]) / n, p.miss_rate(f), 0.006) << f;
}

TEST(PowerLaw, HitRateOfAPlanSumsOverOutcomes) {
  AcceptanceParams p;
  p.a = 0.6;
  p.miss_at_1 = 0.5;
  p.r = 0.5;
  const std::vector<int32_t> f = {3, 2, 1};  // K = 2
  const double expect = 0.4 * (1 - 0.5 / std::sqrt(3.0)) + 0.24 * (1 - 0.5 / std::sqrt(2.0)) +
                        0.36 * (1 - 0.5);
  EXPECT_NEAR(p.hit_rate(f), expect, 1e-12);
}

TEST(GeometricFanOut, WeightsAreThePapersSeries) {
  for (double a : {0.6, 0.8})
    for (double r : {0.3, 1.0}) {
      const int32_t k = 4;
      const std::vector<double> w = geometric_weights(k, a, r);
      ASSERT_EQ(w.size(), 5u);
      for (int32_t i = 0; i < k; ++i)
        EXPECT_NEAR(w[i] / w[0], std::pow(a, i / (1 + r)), 1e-12) << a << " " << r << " " << i;
      EXPECT_NEAR(w[k] / w[0], std::pow(a, k / (1 + r)) * std::pow(1 - a, -1 / (1 + r)), 1e-12);
    }
}

TEST(GeometricFanOut, MaximisesHitRateAmongPlansOfTheSameBudget) {
  // Lagrange: F_k ~ P(k)^(1 / (1 + r)) maximises sum_k P(k) (1 - m1 F_k^-r) for real F. Check
  // against every integer plan of budget 10 over K + 1 = 3 positions: none beats the rounded
  // geometric plan by more than the rounding can explain.
  AcceptanceParams p;
  p.a = 0.7;
  p.miss_at_1 = 0.6;
  p.r = 0.5;
  const std::vector<int32_t> geo = geometric_fan_out(2, 10, p.a, p.r);
  double best = 0;
  for (int32_t f0 = 0; f0 <= 10; ++f0)
    for (int32_t f1 = 0; f0 + f1 <= 10; ++f1) {
      const std::vector<int32_t> plan = {f0, f1, 10 - f0 - f1};
      best = std::max(best, p.hit_rate(plan));
    }
  EXPECT_GE(p.hit_rate(geo), best - 0.005);
  EXPECT_GT(p.hit_rate(geo), p.hit_rate(constant_fan_out(2, 10)) - 1e-12);
}

TEST(BranchPlan, LikeliestFirstWithRoundRobinTies) {
  AcceptanceParams p;
  p.a = 0.7;
  const std::vector<std::vector<int32_t>> fan = {{2, 1, 1}, {2, 1, 1}};
  const std::vector<PlannedBranch> plan = plan_branches(fan, p);
  ASSERT_EQ(plan.size(), 8u);
  for (size_t i = 1; i < plan.size(); ++i) EXPECT_GE(plan[i - 1].weight, plan[i].weight);
  // Equal weights alternate between the two sequences.
  EXPECT_EQ(plan[0].seq, 0);
  EXPECT_EQ(plan[1].seq, 1);
  EXPECT_EQ(plan[0].k, plan[1].k);
}

TEST(BranchPlan, ChunkedJobStopsAtTheFirstBoundaryAfterTheCut) {
  AcceptanceParams p;
  const std::vector<PlannedBranch> plan = plan_branches({{4, 2, 2}}, p);  // 8 branches
  auto cost = [](const std::vector<int64_t>& part) { return 1.0 * double(part.size()); };
  // One rank, chunks of 2 (2 s each), the outcome at t = 3: chunks [0,2) and [2,4) drafted.
  DraftProgress g = run_prespeculation(plan, {{0, 3}}, 2, cost);
  EXPECT_EQ(g.done[0], 4);
  EXPECT_DOUBLE_EQ(g.end_s[0], 4);
  // The first chunk is drafted even when the outcome is already there.
  g = run_prespeculation(plan, {{0, 0}}, 2, cost);
  EXPECT_EQ(g.done[0], 2);
  // One call (chunk 0) cannot be cut.
  g = run_prespeculation(plan, {{0, 0}}, 0, cost);
  EXPECT_EQ(g.done[0], 8);
  // Two ranks share the branches i mod 2.
  g = run_prespeculation(plan, {{0, 100}, {0, 100}}, 1, cost);
  EXPECT_EQ(g.done[0], 4);
  EXPECT_EQ(g.done[1], 4);
  EXPECT_DOUBLE_EQ(g.end_s[1], 4);
}

TEST(ImpossibleConfigs, AcceptanceOutOfRange) {
  AcceptanceParams p;
  p.a = 1.5;
  EXPECT_THROW(p.validate(), Error);
  p.a = 0.5;
  p.r = 0;
  EXPECT_THROW(p.validate(), Error);
}

}  // namespace
}  // namespace ssd::sim
