// The research-only oracle drafter (`--drafter oracle:ALPHA`) on a tiny random target: greedy SD
// equals AR, the measured greedy per-position acceptance is ALPHA, the extremes accept all or
// nothing, its q is the exact mixture it draws from, seeded sampled runs repeat, and the simulated
// cost is paid.
//
// Statistics: under greedy every examined draft position is an independent Bernoulli(ALPHA)
// trial (distinct Philox addresses; see oracle_drafter.h). With n trials the estimate's standard
// error is sqrt(ALPHA (1 - ALPHA) / n); the test requires |rate - ALPHA| < 4 SE (false-alarm
// probability ~6e-5 per check; the runs are seeded, so the outcome is fixed anyway) for the pooled
// rate over >= 1000 trials (4 SE = 0.058 at ALPHA 0.3, 0.051 at 0.8) and for every position with >= 100 trials.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>

#include "runtime/core/error.h"
#include "runtime/drafters/oracle_drafter.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tiny_model.h"
#include "tests/unit/spec/drafting_fixture.h"

namespace ssd {
namespace {

using test::TempDir;
using test::drafting::Engine;
using test::drafting::kPrompts;
using test::drafting::RecordingDrafter;

struct World {
  TempDir tmp;
  std::unique_ptr<Engine> target;
  World() {
    target = std::make_unique<Engine>(
        test::write_tiny_gguf(test::drafting::small_spec(), tmp.file("target.gguf")));
  }
};

struct Shape {
  int32_t k, width;
};
class OracleGreedy : public testing::TestWithParam<Shape> {};

TEST_P(OracleGreedy, SdEqualsAr) {
  World w;
  OracleOptions o;
  o.alpha = 0.5;
  OracleDrafter d(*w.target->model, o);
  for (const auto& prompt : kPrompts) {
    const auto ar = w.target->ar(prompt, 40);
    const auto sd = w.target->sd(d, prompt, 40, GetParam().k, GetParam().width);
    EXPECT_EQ(sd.gen.tokens, ar.tokens);
    EXPECT_GT(sd.stats.accepted, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, OracleGreedy,
                         testing::Values(Shape{1, 1}, Shape{3, 1}, Shape{6, 1}, Shape{1, 2},
                                         Shape{3, 2}, Shape{6, 2}),
                         [](const testing::TestParamInfo<Shape>& p) {
                           return "K" + std::to_string(p.param.k) + "_W" +
                                  std::to_string(p.param.width);
                         });

class OracleAcceptance : public testing::TestWithParam<double> {};

TEST_P(OracleAcceptance, GreedyPerPositionRateIsAlpha) {
  const double alpha = GetParam();
  World w;
  OracleOptions o;
  o.alpha = alpha;
  OracleDrafter oracle(*w.target->model, o);
  RecordingDrafter rec(oracle);
  const int32_t k = 3;
  int64_t trials = 0, successes = 0;
  SamplerConfig greedy;  // temperature 0; the seed still keys the oracle's own draws
  for (uint64_t run = 0; trials < 1000; ++run) {
    greedy.seed = 1000 + run;
    const auto& prompt = kPrompts[run % kPrompts.size()];
    const auto sd = w.target->sd(rec, prompt, 200, k, 1, greedy, run);
    trials = successes = 0;
    for (size_t j = 0; j < rec.trials.size(); ++j) {
      trials += rec.trials[j];
      successes += rec.successes[j];
    }
    ASSERT_LT(run, 100u) << "too few trials accumulate";
  }
  auto check = [&](int64_t s, int64_t n, const std::string& what) {
    const double rate = static_cast<double>(s) / n;
    const double se = std::sqrt(alpha * (1 - alpha) / n);
    EXPECT_LT(std::abs(rate - alpha), 4 * se) << what << ": " << s << "/" << n << " = " << rate;
    std::cout << "  " << what << ": " << s << "/" << n << " = " << rate << " (4 SE = " << 4 * se
              << ")\n";
  };
  check(successes, trials, "pooled");
  for (size_t j = 0; j < rec.trials.size(); ++j)
    if (rec.trials[j] >= 100) check(rec.successes[j], rec.trials[j], "position " + std::to_string(j));
}

INSTANTIATE_TEST_SUITE_P(Alphas, OracleAcceptance, testing::Values(0.3, 0.8));

TEST(Oracle, AlphaOneAcceptsAllAndZeroNothing) {
  World w;
  const int32_t k = 3;
  OracleOptions o;
  o.alpha = 1.0;
  OracleDrafter all(*w.target->model, o);
  const auto a = w.target->sd(all, kPrompts[0], 40, k, 1);
  EXPECT_GE(a.stats.accept_hist[k], a.stats.rounds - 1);
  o.alpha = 0.0;
  OracleDrafter none(*w.target->model, o);
  const auto b = w.target->sd(none, kPrompts[0], 40, k, 1);
  EXPECT_EQ(b.stats.accepted, 0);
  EXPECT_EQ(b.gen.tokens, a.gen.tokens);
}

TEST(Oracle, MixtureIsExact) {
  ProcessedDist other;
  other.tokens = {{4, 0.5}, {9, 0.3}, {2, 0.2}};
  const ProcessedDist q = oracle_mixture(7, other, 0.6);
  double sum = 0;
  for (const TokenProb& tp : q.tokens) sum += tp.prob;
  EXPECT_NEAR(sum, 1.0, 1e-12);
  EXPECT_NEAR(q.prob_of(7), 0.6, 1e-12);
  EXPECT_NEAR(q.prob_of(4), 0.2, 1e-12);
  EXPECT_NEAR(q.prob_of(9), 0.12, 1e-12);
  EXPECT_NEAR(q.prob_of(2), 0.08, 1e-12);
  EXPECT_EQ(q.tokens.front().id, 7);  // sorted by probability
  EXPECT_EQ(oracle_mixture(7, ProcessedDist{}, 0.3).tokens.size(), 1u);  // nothing else: one-hot
  EXPECT_EQ(oracle_mixture(7, other, 0.0).prob_of(7), 0.0);
  EXPECT_THROW(oracle_mixture(4, other, 0.5), Error);  // t* must not be in `other`
}

// Under sampling the draft's q contains the target's draw t* with mass >= ALPHA, sums to 1, and
// the run repeats from its seed.
TEST(Oracle, SampledDraftsAreMixturesAndRunsRepeat) {
  World w;
  OracleOptions o;
  o.alpha = 0.7;
  OracleDrafter d(*w.target->model, o);
  SamplerConfig s;
  s.temperature = 0.8f;
  s.top_k = 40;
  s.seed = 3;
  d.start(0, kPrompts[1]);
  DraftRequest r;
  r.k = 4;
  r.width = 2;
  r.sampler = s;
  const DraftTree t = d.draft({&r, 1}).at(0);
  ASSERT_EQ(t.size(), 8u);
  for (size_t n = 0; n < t.size(); ++n) {
    double sum = 0, top = 0;
    for (const TokenProb& tp : t.q[n].tokens) {
      sum += tp.prob;
      top = std::max(top, tp.prob);
    }
    EXPECT_NEAR(sum, 1.0, 1e-9) << "node " << n;
    if (t.parents[n] != -1 || n == 0) {
      EXPECT_GE(top, 0.7 - 1e-12) << "node " << n;
    }
  }
  const auto a = w.target->sd(d, kPrompts[0], 40, 3, 2, s, 1);
  const auto b = w.target->sd(d, kPrompts[0], 40, 3, 2, s, 1);
  EXPECT_EQ(a.gen.tokens, b.gen.tokens);
  EXPECT_EQ(a.stats.accept_hist, b.stats.accept_hist);
}

TEST(Oracle, LabelledAndValidated) {
  World w;
  OracleOptions o;
  o.alpha = 0.25;
  EXPECT_EQ(OracleDrafter(*w.target->model, o).name(), "oracle:0.25 (research only)");
  o.alpha = 1.5;
  EXPECT_THROW(OracleDrafter(*w.target->model, o), Error);
  o.alpha = 0.5;
  o.cost_us = -1;
  EXPECT_THROW(OracleDrafter(*w.target->model, o), Error);
}

TEST(Oracle, SimulatedCostIsPaidPerCall) {
  World w;
  OracleOptions o;
  o.alpha = 0.5;
  o.cost_us = 30000;
  OracleDrafter d(*w.target->model, o);
  d.start(0, kPrompts[0]);
  DraftRequest r;
  r.k = 1;
  const auto t0 = std::chrono::steady_clock::now();
  d.draft({&r, 1});
  d.draft({&r, 1});
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GE(s, 0.060) << "two calls sleep 30 ms each";
}

}  // namespace
}  // namespace ssd
