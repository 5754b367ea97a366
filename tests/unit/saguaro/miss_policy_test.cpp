// The miss policy (runtime/saguaro/miss_policy.h): b* from the closed form equals b* from a
// direct throughput comparison that sums over the binomial number of misses (an independent
// evaluation of the same model), the corner cases, and MissPolicy's measured lines, default and
// override.
#include "runtime/saguaro/miss_policy.h"

#include <gtest/gtest.h>

#include <cmath>

#include "runtime/core/error.h"

namespace ssd {
namespace {

double binom(int n, int k) {
  return std::exp(std::lgamma(n + 1.0) - std::lgamma(k + 1.0) - std::lgamma(n - k + 1.0));
}

// Tokens per second with each fallback at batch b, the draft time summed over M ~ Bin(b, 1 - h).
bool primary_wins(const MissCosts& c, int b) {
  const double h = c.hit_rate;
  const double tv = c.verify_s0 + c.verify_s1 * b + c.round_s;
  double wait = 0;
  for (int m = 1; m <= b; ++m)
    wait += binom(b, m) * std::pow(1 - h, m) * std::pow(h, b - m) * (c.draft_s0 + c.draft_s1 * m);
  const double primary = b * c.accept_primary / (tv + wait);
  const double backup = b * (h * c.accept_primary + (1 - h) * c.accept_backup) / tv;
  return primary > backup;
}

int brute_b_star(const MissCosts& c, int b_max) {
  int b = 0;
  while (b < b_max && primary_wins(c, b + 1)) ++b;
  return b;
}

TEST(MissPolicy, ClosedFormMatchesTheBinomialSum) {
  int nontrivial = 0;
  for (const double h : {0.3, 0.6, 0.85, 0.95}) {
    for (const double d0 : {0.005, 0.02, 0.06}) {
      for (const double lb : {1.0, 1.6, 2.5}) {
       for (const double to : {0.0, 0.03}) {
        MissCosts c;
        c.round_s = to;
        c.verify_s0 = 0.05;
        c.verify_s1 = 0.002;
        c.draft_s0 = d0;
        c.draft_s1 = 0.004;
        c.accept_primary = 3.0;
        c.accept_backup = lb;
        c.hit_rate = h;
        const int b = critical_batch_size(c, 256);
        EXPECT_EQ(b, brute_b_star(c, 256))
            << "h " << h << " d0 " << d0 << " L_b " << lb << " T_o " << to;
        if (b > 0 && b < 256) ++nontrivial;
       }
      }
    }
  }
  EXPECT_GE(nontrivial, 10);  // the cases really cross over inside the range
}

TEST(MissPolicy, CornerCases) {
  MissCosts c;
  c.verify_s0 = 0.05;
  c.draft_s0 = 0.02;
  c.accept_primary = 3;
  c.accept_backup = 1.5;
  c.hit_rate = 1.0;
  EXPECT_EQ(critical_batch_size(c, 64), 64);  // no misses: the choice never matters
  c.hit_rate = 0.5;
  c.accept_backup = 3.5;
  EXPECT_EQ(critical_batch_size(c, 64), 0);  // the backup is the better speculator anyway
  c.accept_backup = 1.5;
  c.draft_s0 = 0;  // free drafting: the primary always wins
  EXPECT_EQ(critical_batch_size(c, 64), 64);
  EXPECT_THROW(critical_batch_size(c, 0), Error);
}

TEST(MissPolicy, DefaultThenDerivedThenOverride) {
  MissPolicyOptions o;
  o.b_star_default = 3;
  MissPolicy p(o);
  EXPECT_EQ(p.critical_batch(), 3);
  EXPECT_FALSE(p.derived());
  EXPECT_EQ(p.choose(3), Fallback::kPrimary);
  EXPECT_EQ(p.choose(4), Fallback::kBackup);
  o.backup_must_not_be_worse = true;
  EXPECT_EQ(MissPolicy(o).choose(4), Fallback::kPrimary)
      << "not-worse: past b*, but the backup was never measured";
  o.backup_must_not_be_worse = false;

  // T_d(m) = 0.01 + 0.004 m and T_v(b) = 0.05 + 0.002 b, measured exactly at a few sizes.
  for (int m : {1, 2, 4}) p.observe_primary_draft(m, 0.01 + 0.004 * m);
  for (int b : {1, 2, 4}) p.observe_verify(b, 0.05 + 0.002 * b);
  for (int i = 0; i < 10; ++i) {
    p.observe_round(SpecSource::kCache, 2);   // L_p = 3
    p.observe_round(SpecSource::kBackup, 0);  // L_b = 1
    p.observe_lookup(i < 7);                  // h = 0.7
  }
  EXPECT_TRUE(p.derived());
  const MissCosts c = p.costs();
  EXPECT_NEAR(c.draft_s0, 0.01, 1e-9);  // a least-squares line through exact points
  EXPECT_NEAR(c.draft_s1, 0.004, 1e-9);
  EXPECT_NEAR(c.verify_s0, 0.05, 1e-9);
  EXPECT_NEAR(c.verify_s1, 0.002, 1e-9);
  EXPECT_DOUBLE_EQ(c.accept_primary, 3.0);
  EXPECT_DOUBLE_EQ(c.accept_backup, 1.0);
  EXPECT_DOUBLE_EQ(c.hit_rate, 0.7);
  const int b = critical_batch_size(c, o.b_max);
  EXPECT_EQ(p.critical_batch(), b);
  EXPECT_EQ(b, brute_b_star(c, o.b_max));
  EXPECT_GT(b, 0);

  o.b_star = 0;  // override: always the backup
  MissPolicy fixed(o);
  EXPECT_EQ(fixed.choose(1), Fallback::kBackup);
  EXPECT_THROW(MissPolicy(MissPolicyOptions{.b_star = -2}), Error);
}

// With --miss-policy not-worse, past b* the policy picks the backup only when it is not worse
// than the primary: its measured acceptance (shadow drafts count) at least the primary's over
// min_samples rounds.
TEST(MissPolicy, NotWorseTakesTheBackupOnlyWhenNotWorse) {
  MissPolicyOptions o;
  o.b_star_default = 0;  // every batch is past b* until measured
  EXPECT_EQ(MissPolicy(o).choose(1), Fallback::kBackup) << "without the guard: past b*, backup";
  o.backup_must_not_be_worse = true;
  MissPolicy p(o);
  for (int i = 0; i < 5; ++i) p.observe_round(SpecSource::kPrimary, 1);  // L_p = 2
  EXPECT_EQ(p.choose(1), Fallback::kPrimary);
  p.observe_shadow(0);
  p.observe_shadow(1);
  EXPECT_FALSE(p.backup_not_worse()) << "two shadow rounds are too few";
  p.observe_shadow(2);  // L_b = 1 + 3 / 3 = 2: not worse
  EXPECT_TRUE(p.backup_not_worse());
  EXPECT_EQ(p.choose(1), Fallback::kBackup);
  p.observe_shadow(0);  // L_b = 1.75 < 2
  EXPECT_FALSE(p.backup_not_worse());
  EXPECT_EQ(p.choose(1), Fallback::kPrimary);
  o.b_star = 0;  // the override keeps its word
  EXPECT_EQ(MissPolicy(o).choose(1), Fallback::kBackup);
}

// The round's fixed cost T_o (the median of the latest rounds' overheads) counts as verification
// time: both fallbacks pay it, so it shrinks the share of a round the backup saves. At B = 1:
// verify 4 ms, a primary draft of 10 ms accepted 2.0, the backup 1.5, no hits. Without T_o the
// backup wins (1.5 tokens / 4 ms against 2.0 / 14 ms); with T_o = 31 ms the primary does
// (1.5 / 35 ms against 2.0 / 45 ms).
TEST(MissPolicy, RoundOverheadCountsAsVerificationTime) {
  MissPolicyOptions o;
  MissPolicy p(o);
  for (int i = 0; i < 4; ++i) {
    p.observe_primary_draft(1, 0.010);
    p.observe_verify(1, 0.004);
    p.observe_round(SpecSource::kPrimary, 1);  // L_p = 2
    p.observe_shadow(0);
    p.observe_shadow(1);  // L_b = 1.5
    p.observe_lookup(false);
  }
  ASSERT_TRUE(p.derived());
  EXPECT_EQ(p.costs().round_s, 0.0);
  EXPECT_EQ(p.choose(1), Fallback::kBackup);
  p.observe_round_overhead(0.030);
  p.observe_round_overhead(0.031);
  p.observe_round_overhead(5.0);     // one stall: the median ignores it
  p.observe_round_overhead(-0.001);  // not a measurement
  EXPECT_DOUBLE_EQ(p.costs().round_s, 0.031);
  EXPECT_EQ(p.choose(1), Fallback::kPrimary);
  // The window forgets: the latest kOverheadWindow rounds at 1 ms bring the backup back.
  for (size_t i = 0; i < MissPolicy::kOverheadWindow; ++i) p.observe_round_overhead(0.001);
  EXPECT_DOUBLE_EQ(p.costs().round_s, 0.001);
  EXPECT_EQ(p.choose(1), Fallback::kBackup);
}

TEST(MissPolicy, LineFitOfOneBatchSizeIsItsMean) {
  LineFit f;
  f.add(2, 1.0);
  f.add(2, 3.0);
  EXPECT_DOUBLE_EQ(f.slope(), 0.0);
  EXPECT_DOUBLE_EQ(f.intercept(), 2.0);
  EXPECT_DOUBLE_EQ(f.at(10), 2.0);
}

}  // namespace
}  // namespace ssd
