// A job's batches in order (SimCarry, round_sim.h; `ssd simulate --job-traces`): the drafter
// actor's draft-what-fits budget and miss policy, and the leader's pre-speculation switch, outlive
// a batch, so a later batch starts where the job's earlier ones left them, as in the runtime.
#include <gtest/gtest.h>

#include "tests/unit/sim/sim_test_configs.h"
#include "topology/sim/round_sim.h"

namespace ssd::sim {
namespace {

TEST(JobCarry, ALaterBatchKeepsTheBudgetThatStoppedPreSpeculating) {
  // The 1B drafter on a CPU-class device: a branch costs more than the verification window. Its
  // first batch drafts its unmeasured rounds, then nothing; a second batch of the same job has
  // measured already and drafts nothing, where a batch simulated alone drafts those rounds again.
  SimConfig c = h100_config();
  c.cluster.drafter_device = device_preset("cpu");
  c.ssd.chunk = 2;
  c.ssd.miss_at_leader = false;
  const std::vector<OutcomeRecord> t = lookup_trace(12, 2, 4, 1, false);
  SimCarry carry;
  const SimResult first = simulate(SimMode::kSsd, c, &t, &carry);
  const SimResult second = simulate(SimMode::kSsd, c, &t, &carry);
  const SimResult alone = simulate(SimMode::kSsd, c, &t);
  ASSERT_GT(first.branches_drafted, 0);
  EXPECT_EQ(alone.branches_drafted, first.branches_drafted);  // no carry: the same start
  EXPECT_EQ(second.branches_drafted, 0);
  EXPECT_LT(second.seconds, alone.seconds);
}

TEST(JobCarry, TheFirstSpeculationsCountAsADraftCallSoTheSecondBatchIsGated) {
  // Batches of one sequence whose only drafting round is the first (then plain decode steps, after
  // which a model drafter plans nothing), with a drafter slower than any window: each batch times
  // one pre-speculation chunk at most. Counting each batch's first speculations as a draft call
  // as well (drafter_actor.cpp), the budget has its three calls at the second batch's start and
  // keeps that batch from drafting; counted from chunks alone, the second and third batches each
  // drafted a chunk that delayed their next round.
  SimConfig c = h100_config();
  c.cluster.drafter_device = device_preset("cpu");
  c.ssd.chunk = 2;
  c.ssd.miss_at_leader = false;
  c.work.batch = 1;
  std::vector<OutcomeRecord> t = lookup_trace(8, 1, 4, 1, false);
  for (OutcomeRecord& o : t)
    if (o.round > 0) o.k = 0, o.accepted = 0;
  SimCarry carry;
  std::vector<int64_t> drafted;
  for (int b = 0; b < 3; ++b) drafted.push_back(simulate(SimMode::kSsd, c, &t, &carry).branches_drafted);
  EXPECT_GT(drafted[0], 0);
  EXPECT_EQ(drafted[1], 0);
  EXPECT_EQ(drafted[2], 0);
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
