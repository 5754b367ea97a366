// The drafter's figures across runs (remote_decode.h): since() subtracts every counter, time and
// per-k count of an earlier read; SplitFigures::add() sums counters and times and keeps the later
// run's plan (fan-out, b*).
#include <gtest/gtest.h>

#include "actors/roles/remote_decode.h"

namespace ssd {
namespace {

DrafterStatsMsg figures(int64_t n, double t) {
  DrafterStatsMsg d;
  d.rounds = 10 * n;
  d.hits = 4 * n;
  d.misses = 6 * n;
  d.fallback_primary = n;
  d.fallback_backup = 5 * n;
  d.branches = 80 * n;
  d.branches_planned = 90 * n;
  d.branches_cached = 70 * n;
  d.prespec_cut = 3 * n;
  d.predicted = 5 * n;
  d.prespec_s = t;
  d.fallback_s = t / 2;
  d.busy_s = 2 * t;
  d.hits_at_k = {n, 2 * n};
  d.outcomes_at_k = {3 * n, 4 * n};
  d.fan_out_after_hit = {static_cast<int32_t>(n), 1};
  d.critical_batch = static_cast<int32_t>(n);
  return d;
}

TEST(SplitFigures, SinceSubtractsEveryCounter) {
  const DrafterStatsMsg d = since(figures(3, 3.0), figures(1, 1.0));
  DrafterStatsMsg want = figures(2, 2.0);
  want.fan_out_after_hit = {3, 1};  // the plan is the later read's
  want.critical_batch = 3;
  EXPECT_EQ(d, want);
}

TEST(SplitFigures, AddSumsCountersAndKeepsTheLaterPlan) {
  SplitFigures a, b;
  a.hits = 2;
  a.drafter = figures(1, 1.0);
  b.hits = 3;
  a.decode_steps = 4;
  b.decode_steps = 1;
  b.drafter = figures(2, 2.0);
  a.add(b);
  EXPECT_EQ(a.hits, 5);
  EXPECT_EQ(a.decode_steps, 5);
  const DrafterStatsMsg three = figures(3, 3.0);
  EXPECT_EQ(a.drafter.rounds, three.rounds);
  EXPECT_EQ(a.drafter.branches_planned, three.branches_planned);
  EXPECT_EQ(a.drafter.predicted, three.predicted);
  EXPECT_DOUBLE_EQ(a.drafter.busy_s, three.busy_s);
  EXPECT_EQ(a.drafter.fan_out_after_hit, b.drafter.fan_out_after_hit);
  EXPECT_EQ(a.drafter.critical_batch, 2);
}

}  // namespace
}  // namespace ssd
