// A job's batches in order (SimCarry, round_sim.h; `ssd simulate --job-traces`): the drafter
// actor's draft-what-fits budget and miss policy, and the leader's pre-speculation switch, outlive
// a batch, so a later batch starts where the job's earlier ones left them, as in the runtime.
#include <gtest/gtest.h>

#include "tests/unit/sim/sim_test_configs.h"
#include "topology/sim/round_sim.h"

namespace ssd::sim {
namespace {

TEST(JobCarry, ALaterBatchPreSpeculatesItsFirstRoundWithTheWindowsTheJobMeasured) {
  // A drafter far faster than the verification: nothing is pre-speculated before the job's first
  // outcome (no window says what fits yet), after that every plan fits. A second batch of the same
  // job knows the windows from its start and drafts its first round too; a batch alone does not.
  SimConfig c = h100_config();
  c.ssd.miss_at_leader = false;
  const std::vector<OutcomeRecord> t = lookup_trace(12, 2, 4, 1, false);
  SimCarry carry;
  const SimResult first = simulate(SimMode::kSsd, c, &t, &carry);
  const SimResult second = simulate(SimMode::kSsd, c, &t, &carry);
  const SimResult alone = simulate(SimMode::kSsd, c, &t);
  ASSERT_GT(first.branches_drafted, 0);
  EXPECT_EQ(alone.branches_drafted, first.branches_drafted);  // no carry: the same start
  EXPECT_GT(second.branches_drafted, first.branches_drafted);
  EXPECT_GE(second.hits, first.hits);
}

TEST(JobCarry, ADrafterSlowerThanAnyWindowDraftsNoChunkNotEvenInTheFirstRound) {
  // Batches of one sequence whose only drafting round is the first (then plain decode steps, after
  // which a model drafter plans nothing), with a drafter slower than any window. Each batch's first
  // speculations are a measured draft call (drafter_actor.cpp), so the budget knows a branch's cost
  // before the first chunk; with no window measured yet it drafts nothing, and later batches have
  // windows shorter than a branch. Before, each batch's first round drafted a chunk unmeasured
  // (the first batch's until three calls were timed), and the target waited for it.
  SimConfig c = h100_config();
  c.cluster.drafter_device = device_preset("cpu");
  c.ssd.chunk = 2;
  c.ssd.miss_at_leader = false;
  c.work.batch = 1;
  std::vector<OutcomeRecord> t = lookup_trace(8, 1, 4, 1, false);
  for (OutcomeRecord& o : t)
    if (o.round > 0) o.k = 0, o.accepted = 0;
  SimCarry carry;
  for (int b = 0; b < 3; ++b)
    EXPECT_EQ(simulate(SimMode::kSsd, c, &t, &carry).branches_drafted, 0) << "batch " << b;
  c.ssd.fit_window = false;  // without the budget the same batches draft their first rounds
  EXPECT_GT(simulate(SimMode::kSsd, c, &t).branches_drafted, 0);
}

TEST(JobCarry, ALaterBatchStartsWithTheCriticalBatchTheJobLearnt) {
  // A primary whose every call costs a second: the first batch answers its first misses with it,
  // measures it and turns to the backup; the job's second batch uses the backup from its first
  // miss on, a batch alone starts from the default b* again.
  SimConfig c = h100_config();
  c.cluster.drafter_device.drafter_fits["llama-3.2-1b"] =
      DrafterFit{.mem_efficiency = 0.8, .peak_flops = 500e12, .call_s = 1.0};
  c.ssd.miss_at_leader = false;
  const std::vector<OutcomeRecord> t = lookup_trace(16, 4, 4, 1, false);
  SimCarry carry;
  const SimResult first = simulate(SimMode::kSsd, c, &t, &carry);
  const SimResult second = simulate(SimMode::kSsd, c, &t, &carry);
  const SimResult alone = simulate(SimMode::kSsd, c, &t);
  ASSERT_GT(first.fallback_primary, 0);
  ASSERT_GT(first.fallback_backup, 0);
  EXPECT_EQ(alone.fallback_primary, first.fallback_primary);
  EXPECT_EQ(second.fallback_primary, 0);
  EXPECT_LT(second.b_star, 4);
}

}  // namespace
}  // namespace ssd::sim
