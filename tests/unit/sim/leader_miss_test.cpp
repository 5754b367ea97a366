// --miss-at leader in the simulator (round_sim.cpp, run_ssd; the runtime's remote_decode.cpp,
// draft_misses): a miss the drafter answers with a lookup is drafted by the target leader at once,
// so that round waits for no answer; a model primary's miss still waits until the miss policy
// chooses the backup; a hit whose push comes after the verification is drafted by the leader too
// (a miss). The outcome trace records each leader-drafted miss ("leader") and a replay follows it;
// likewise which fallback the drafter answered a miss with ("backup").
#include <gtest/gtest.h>

#include "runtime/core/error.h"
#include "tests/unit/sim/sim_test_configs.h"
#include "topology/sim/outcome_trace.h"
#include "topology/sim/round_sim.h"

namespace ssd::sim {
namespace {

SimConfig ngram_config() {
  SimConfig c = h100_config();
  c.drafter.shape = ModelShape{};
  c.drafter.shape.name = "ngram";
  c.drafter.shape.style = DraftStyle::kLookup;
  c.cluster.drafter_link = {"slow", 200e-6, 10e9};  // 200 us each way: visible per round
  return c;
}

TEST(LeaderMiss, ALookupMissIsDraftedByTheLeaderWithNoRoundTrip) {
  // An n-gram primary: every miss is a lookup. With the leader drafting them, only round 0 waits
  // for an answer (its first speculations); with the drafter answering, every round does, each
  // paying the outcome's and the answer's latency at least.
  SimConfig c = ngram_config();
  const std::vector<OutcomeRecord> t = lookup_trace(20, 2, 4, 1, false);
  const SimResult leader = simulate(SimMode::kSsd, c, &t);
  c.ssd.miss_at_leader = false;
  const SimResult drafter = simulate(SimMode::kSsd, c, &t);
  ASSERT_EQ(leader.rounds, drafter.rounds);
  ASSERT_EQ(leader.misses, drafter.misses);
  EXPECT_EQ(leader.leader_drafted, 19 * 2);
  EXPECT_EQ(drafter.leader_drafted, 0);
  EXPECT_EQ(leader.rounds_waited, 1);
  EXPECT_EQ(drafter.rounds_waited, 20);
  EXPECT_EQ(leader.fallback_primary + leader.fallback_backup, 0);
  EXPECT_LT(leader.seconds, drafter.seconds - 19 * 2 * 200e-6);
  EXPECT_LT(leader.target_wait_s, drafter.target_wait_s - 19 * 2 * 200e-6);
}

TEST(LeaderMiss, AModelPrimarysMissWaitsUntilThePolicyChoosesTheBackup) {
  // The 1B model primary: at b* >= B the primary answers misses on the drafter rank (the leader
  // cannot draft them: same run as --miss-at drafter); at b* = 0 the n-gram backup answers them,
  // which the leader drafts itself.
  SimConfig c = h100_config();
  c.cluster.drafter_link = {"slow", 200e-6, 10e9};
  c.ssd.b_star = 4;
  const std::vector<OutcomeRecord> t = lookup_trace(16, 2, 4, 1, false);
  const SimResult primary = simulate(SimMode::kSsd, c, &t);
  c.ssd.miss_at_leader = false;
  const SimResult primary_drafter = simulate(SimMode::kSsd, c, &t);
  EXPECT_EQ(primary.leader_drafted, 0);
  EXPECT_EQ(primary.fallback_primary, 15 * 2);
  EXPECT_NEAR(primary.seconds, primary_drafter.seconds, 1e-12);

  c.ssd.b_star = 0;
  const SimResult backup_drafter = simulate(SimMode::kSsd, c, &t);
  c.ssd.miss_at_leader = true;
  const SimResult backup = simulate(SimMode::kSsd, c, &t);
  EXPECT_EQ(backup.leader_drafted, 15 * 2);
  EXPECT_EQ(backup.fallback_backup, 0);
  EXPECT_EQ(backup_drafter.fallback_backup, 15 * 2);
  EXPECT_LT(backup.seconds, backup_drafter.seconds - 15 * 2 * 200e-6);
}

TEST(LeaderMiss, ALeaderThatTakesNoPushesWaitsForEveryAnswer) {
  // The drafter tells a change of its miss choice in a push when no answer comes; a leader that
  // takes no pushes could go on with a stale one, so it drafts nothing (draft_misses).
  SimConfig c = ngram_config();
  c.ssd.push = false;
  const std::vector<OutcomeRecord> t = lookup_trace(10, 2, 4, 1, false);
  const SimResult r = simulate(SimMode::kSsd, c, &t);
  EXPECT_EQ(r.leader_drafted, 0);
  EXPECT_EQ(r.rounds_waited, 10);
}

TEST(LeaderMiss, AHitWhosePushComesLateIsAMissTheLeaderDrafts) {
  // Sampled outcomes, the n-gram primary with a lookup priced so dear (20 ms per sequence) that
  // the one-call pre-speculation ends after the verification, and no draft-what-fits (which would
  // draft only what ends in time, and with these windows nothing): the leader drafts the outcomes
  // itself instead of waiting for the late pushes, so most outcomes that hit when the drafter
  // answers are misses here.
  SimConfig c = ngram_config();
  c.drafter.lookup_s = 20e-3;
  c.ssd.fit_window = false;
  c.work.tokens = 48;
  const SimResult leader = simulate(SimMode::kSsd, c);
  c.ssd.miss_at_leader = false;
  const SimResult drafter = simulate(SimMode::kSsd, c);
  EXPECT_GT(drafter.hits, 10);
  EXPECT_LT(3 * leader.hits, drafter.hits);
  // Every miss but those before a decode step (the last tokens) and round 0's, drafted by the
  // leader: more than three quarters of them.
  EXPECT_GT(4 * leader.leader_drafted, 3 * leader.misses);
}

TEST(LeaderMiss, ARecordedRunReplaysToTheSameLeaderDraftsAndTime) {
  // The simulator's own trace records "leader" on every SSD record; replaying it reproduces the
  // counts and, with the same costs, the time.
  SimConfig c = ngram_config();
  c.work.tokens = 64;
  const SimResult run = simulate(SimMode::kSsd, c);
  ASSERT_GT(run.leader_drafted, 0);
  int64_t recorded = 0;
  for (const OutcomeRecord& r : run.outcomes) {
    ASSERT_TRUE(r.leader.has_value());
    recorded += *r.leader;
  }
  EXPECT_EQ(recorded, run.leader_drafted);
  EXPECT_EQ(summarize(run.outcomes).leader_drafted, run.leader_drafted);
  const SimResult replay = simulate(SimMode::kSsd, c, &run.outcomes);
  EXPECT_EQ(replay.leader_drafted, run.leader_drafted);
  EXPECT_EQ(replay.hits, run.hits);
  EXPECT_EQ(replay.misses, run.misses);
  EXPECT_EQ(replay.tokens, run.tokens);
  EXPECT_NEAR(replay.seconds, run.seconds, 1e-9 * run.seconds);
}

TEST(LeaderMiss, AReplayedTraceSaysWhichMissesTheLeaderDrafted) {
  // A model primary at b* >= B would answer every miss on the drafter rank; a trace that records
  // the leader drafting sequence 0's misses is followed (its policy learnt otherwise in the run).
  SimConfig c = h100_config();
  c.ssd.b_star = 4;
  std::vector<OutcomeRecord> t = lookup_trace(12, 2, 4, 1, false);
  for (OutcomeRecord& r : t) r.leader = r.seq == 0 && r.hit.has_value();
  const SimResult r = simulate(SimMode::kSsd, c, &t);
  EXPECT_EQ(r.leader_drafted, 11);
  EXPECT_EQ(r.fallback_primary, 11);
}

TEST(LeaderMiss, TheFieldSurvivesTheTraceFormatAndContradictionsAreRefused) {
  OutcomeRecord r{.round = 2, .seq = 1, .k = 4, .accepted = 1, .hit = false, .prespec = true,
                  .leader = true};
  const OutcomeRecord back = parse_outcome_line(to_jsonl_line(r), "test");
  ASSERT_TRUE(back.leader.has_value());
  EXPECT_TRUE(*back.leader);
  EXPECT_FALSE(parse_outcome_line(R"({"round":0,"seq":0,"k":2,"accepted":0})", "t").leader);
  EXPECT_THROW(parse_outcome_line(R"({"round":0,"seq":0,"k":2,"accepted":0,"leader":1})", "t"),
               Error);
  EXPECT_THROW(
      parse_outcome_line(R"({"round":0,"seq":0,"k":2,"accepted":0,"hit":true,"leader":true})",
                         "t"),
      Error);
}

TEST(MissFallback, AReplayedTraceSaysWhichFallbackTheDrafterAnsweredWith) {
  // A model primary, the drafter rank answering every miss (--miss-at drafter). The runtime's
  // policy chose per round; a replay follows the trace's "backup" whatever its own policy would:
  // at b* = 0 (this run's policy: the backup) a trace saying "primary" is drafted by the primary,
  // and at b* = 4 one saying "backup" by the backup.
  SimConfig c = h100_config();
  c.ssd.miss_at_leader = false;
  std::vector<OutcomeRecord> t = lookup_trace(12, 2, 4, 1, false);
  c.ssd.b_star = 0;
  const SimResult own = simulate(SimMode::kSsd, c, &t);
  EXPECT_EQ(own.fallback_backup, 11 * 2);
  for (OutcomeRecord& r : t)
    if (r.hit.has_value()) r.backup = false;
  const SimResult primary = simulate(SimMode::kSsd, c, &t);
  EXPECT_EQ(primary.fallback_primary, 11 * 2);
  EXPECT_EQ(primary.fallback_backup, 0);
  EXPECT_GT(primary.seconds, own.seconds);  // the 1B primary drafts; the lookup costs ~nothing
  c.ssd.b_star = 4;
  for (OutcomeRecord& r : t)
    if (r.hit.has_value()) r.backup = true;
  const SimResult backup = simulate(SimMode::kSsd, c, &t);
  EXPECT_EQ(backup.fallback_backup, 11 * 2);
  EXPECT_EQ(backup.fallback_primary, 0);
}

TEST(MissFallback, ARecordedRunSaysWhichFallbackAnsweredEachMissAndReplaysToTheSameTime) {
  // Sampled outcomes, the model primary, the drafter answering misses: every miss it answered
  // before a drafted round carries "backup" (as the policy chose), hits and decode steps none; the
  // replay reproduces the fallback counts and the time.
  SimConfig c = h100_config();
  c.ssd.miss_at_leader = false;
  c.work.tokens = 64;
  const SimResult run = simulate(SimMode::kSsd, c);
  ASSERT_GT(run.fallback_primary + run.fallback_backup, 0);
  int64_t primary = 0, backup = 0;
  for (const OutcomeRecord& r : run.outcomes) {
    if (r.hit.value_or(false)) {
      EXPECT_FALSE(r.backup.has_value());
    }
    if (r.backup) ++(*r.backup ? backup : primary);
  }
  EXPECT_EQ(primary, run.fallback_primary);
  EXPECT_EQ(backup, run.fallback_backup);
  const SimResult replay = simulate(SimMode::kSsd, c, &run.outcomes);
  EXPECT_EQ(replay.fallback_primary, run.fallback_primary);
  EXPECT_EQ(replay.fallback_backup, run.fallback_backup);
  EXPECT_NEAR(replay.seconds, run.seconds, 1e-9 * run.seconds);
}

TEST(MissFallback, TheFieldSurvivesTheTraceFormatAndContradictionsAreRefused) {
  OutcomeRecord r{.round = 2, .seq = 1, .k = 4, .accepted = 1, .hit = false, .prespec = true,
                  .leader = false, .backup = true};
  const OutcomeRecord back = parse_outcome_line(to_jsonl_line(r), "test");
  ASSERT_TRUE(back.backup.has_value());
  EXPECT_TRUE(*back.backup);
  EXPECT_FALSE(parse_outcome_line(R"({"round":0,"seq":0,"k":2,"accepted":0})", "t").backup);
  EXPECT_THROW(parse_outcome_line(R"({"round":0,"seq":0,"k":2,"accepted":0,"backup":"yes"})", "t"),
               Error);
  EXPECT_THROW(
      parse_outcome_line(R"({"round":0,"seq":0,"k":2,"accepted":0,"hit":true,"backup":false})",
                         "t"),
      Error);
  EXPECT_THROW(parse_outcome_line(
                   R"({"round":0,"seq":0,"k":2,"accepted":0,"hit":false,"leader":true,"backup":true})",
                   "t"),
               Error);
}

TEST(LeaderMiss, TheClosedFormDropsTheRoundTripAndAgreesWithTheEventSimulation) {
  // The n-gram primary on the GPU presets: the closed form with the leader drafting misses has no
  // link latency in its round, so it beats the drafter-answered form by more than two latencies
  // a round, and it agrees with the event simulation within 10%.
  SimConfig c = ngram_config();
  c.work.tokens = 256;
  const AnalyticEstimate leader = analytic_estimate(c);
  const SimResult sim = simulate(SimMode::kSsd, c);
  c.ssd.miss_at_leader = false;
  const AnalyticEstimate drafter = analytic_estimate(c);
  EXPECT_GT(leader.ssd_tokens_per_s, drafter.ssd_tokens_per_s);
  EXPECT_NEAR(sim.tokens_per_s() / leader.ssd_tokens_per_s, 1.0, 0.10);
}

}  // namespace
}  // namespace ssd::sim
