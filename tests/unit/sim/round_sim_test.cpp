// The round simulator (topology/sim/round_sim.h): a replayed outcome trace reproduces the
// recorded run's counts exactly, the timelines of AR and SD equal their closed forms, and SSD
// hides drafting behind verification when its cache hits.
#include <gtest/gtest.h>

#include <fstream>

#include "runtime/core/error.h"
#include "tests/support/temp_dir.h"
#include "tests/unit/sim/sim_test_configs.h"
#include "topology/sim/chrome_trace.h"
#include "topology/sim/round_sim.h"
#include "topology/sim/roofline.h"

namespace ssd::sim {
namespace {

TEST(Replay, ReproducesTheRecordedRunsCountsExactly) {
  for (SimMode mode : {SimMode::kSd, SimMode::kSsd}) {
    SimConfig c = h100_config();
    const SimResult rec = simulate(mode, c);
    ASSERT_GT(rec.seq_rounds, 20);
    test::TempDir dir;
    write_outcome_trace(dir.file("t.jsonl"), rec.outcomes);
    const std::vector<OutcomeRecord> trace = read_outcome_trace(dir.file("t.jsonl"));
    const TraceSummary sum = summarize(trace);
    // A different seed and acceptance: a replay must not look at either.
    c.seed = 99;
    c.primary.a = 0.3;
    const SimResult rep = simulate(mode, c, &trace);
    EXPECT_EQ(rep.rounds, rec.rounds) << mode_name(mode);
    EXPECT_EQ(rep.seq_rounds, rec.seq_rounds);
    EXPECT_EQ(rep.tokens, rec.tokens);
    EXPECT_EQ(rep.hits, rec.hits);
    EXPECT_EQ(rep.misses, rec.misses);
    EXPECT_DOUBLE_EQ(rep.mal(), rec.mal());
    EXPECT_DOUBLE_EQ(rep.hit_rate(), rec.hit_rate());
    EXPECT_EQ(rep.rounds, sum.rounds);
    EXPECT_DOUBLE_EQ(rep.mal(), sum.mal());
    EXPECT_DOUBLE_EQ(rep.hit_rate(), sum.hit_rate());
  }
}

TEST(Replay, AHandWrittenTraceGivesItsOwnFigures) {
  test::TempDir dir;
  {
    std::ofstream o(dir.file("t.jsonl"));
    o << "# two sequences, three rounds\n"
      << R"({"round":0,"seq":0,"k":4,"accepted":4,"bonus_rank":0,"hit":true})" << "\n"
      << R"({"round":0,"seq":7,"k":4,"accepted":1,"bonus_rank":3,"hit":false})" << "\n"
      << R"({"round":1,"seq":0,"k":4,"accepted":2,"bonus_rank":0,"hit":true})" << "\n"
      << R"({"round":1,"seq":7,"k":4,"accepted":0,"hit":true})" << "\n"
      << R"({"round":2,"seq":7,"k":2,"accepted":2,"bonus_rank":1,"hit":false})" << "\n";
  }
  const std::vector<OutcomeRecord> t = read_outcome_trace(dir.file("t.jsonl"));
  const SimResult r = simulate(SimMode::kSsd, h100_config(), &t);
  EXPECT_EQ(r.rounds, 3);
  EXPECT_EQ(r.seq_rounds, 5);
  EXPECT_EQ(r.tokens, 5 + 2 + 3 + 1 + 3);
  EXPECT_DOUBLE_EQ(r.mal(), 14.0 / 5);
  EXPECT_DOUBLE_EQ(r.hit_rate(), 3.0 / 5);
  // SD replays the same rounds; AR decodes each sequence's tokens one step at a time.
  EXPECT_EQ(simulate(SimMode::kSd, h100_config(), &t).rounds, 3);
  const SimResult ar = simulate(SimMode::kAr, h100_config(), &t);
  EXPECT_EQ(ar.tokens, 14);
  EXPECT_EQ(ar.rounds, 8);  // sequence 0: 8 tokens, sequence 7: 6
}

TEST(Replay, MalformedTraceLinesNameTheLine) {
  test::TempDir dir;
  {
    std::ofstream o(dir.file("bad.jsonl"));
    o << R"({"round":0,"seq":0,"k":4,"accepted":1})" << "\n"
      << R"({"round":1,"seq":0,"k":4,"accepted":5})" << "\n";
  }
  try {
    read_outcome_trace(dir.file("bad.jsonl"));
    FAIL() << "accepted > k was read";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("line 2"), std::string::npos) << e.what();
  }
  {
    std::ofstream o(dir.file("dup.jsonl"));
    o << R"({"round":0,"seq":0,"k":4,"accepted":1})" << "\n"
      << R"({"round":0,"seq":0,"k":4,"accepted":2})" << "\n";
  }
  EXPECT_THROW(read_outcome_trace(dir.file("dup.jsonl")), Error);
  {
    std::ofstream o(dir.file("junk.jsonl"));
    o << "not json\n";
  }
  EXPECT_THROW(read_outcome_trace(dir.file("junk.jsonl")), Error);
}

TEST(Timeline, ArIsTheSumOfItsForwards) {
  SimConfig c = h100_config();
  c.work = {.batch = 2, .tokens = 5, .prompt = 10, .k = 4};
  const SimResult r = simulate(SimMode::kAr, c);
  double t = 0;
  for (int i = 0; i < 5; ++i)
    t += forward_cost(c.target, c.cluster.target_device, 4, c.cluster.tp_link,
                      {.rows = 2, .seqs = 2, .context = 10.0 + i})
             .total_s;
  EXPECT_NEAR(r.seconds, t, 1e-12);
  EXPECT_EQ(r.tokens, 10);
  EXPECT_NEAR(r.target_busy_s + r.comm_s, r.seconds, 1e-12);
}

TEST(Timeline, SdRoundIsDraftThenVerifyWithTwoMessages) {
  // Every draft fully accepted (a = 1): each round emits K + 1 tokens, so 2 rounds make 10.
  SimConfig c = h100_config();
  c.work = {.batch = 1, .tokens = 10, .prompt = 50, .k = 4};
  c.primary.a = 1;
  const SimResult r = simulate(SimMode::kSd, c);
  ASSERT_EQ(r.rounds, 2);
  const LinkProfile& l = c.cluster.drafter_link;
  // The leader's StartSeqs, then the drafter's own pass over the prompt (in the decode time).
  double t = l.message_s(16 + 16 + 4 * 50.0) +
             draft_seconds(c.drafter, c.cluster.drafter_device, 1, 50, 0, 0, false);
  double ctx = 50, suffix = 1;
  for (int round = 0; round < 2; ++round) {
    const int k = 4;  // round 1 has 5 tokens left: a full speculation of 4 plus the bonus
    t += draft_seconds(c.drafter, c.cluster.drafter_device, 1, suffix, k, ctx, false);
    t += l.message_s(16 + 16 + 8.0 * k);
    t += forward_cost(c.target, c.cluster.target_device, 4, l,
                      {.rows = k + 1.0, .seqs = 1, .context = ctx})
             .total_s;
    if (round == 0) t += l.message_s(16 + 16 + 5 * 4.0);
    ctx += k + 1;
    suffix = k + 1;
  }
  EXPECT_NEAR(r.seconds, t, 1e-12);
}

TEST(Timeline, SsdHidesDraftingWhenTheCacheHits) {
  SimConfig c = h100_config();
  c.work.batch = 1;
  c.primary.a = 0.8;
  c.primary.miss_at_1 = 0.0;  // the bonus is always the drafter's top choice: every plan hits
  c.ssd.budget = 8;
  const SimResult sd = simulate(SimMode::kSd, c);
  const SimResult ssd = simulate(SimMode::kSsd, c);
  // Every round but the job's first, which pre-speculates nothing: no outcome has come yet to
  // say what fits before the next (runtime/saguaro/prespec_budget.h).
  EXPECT_EQ(ssd.misses, 1);
  EXPECT_GT(ssd.hits, 10);
  EXPECT_GT(ssd.tokens_per_s(), 1.2 * sd.tokens_per_s());
  // The target waits only for the messages (and round 0's draft), far less than in SD.
  EXPECT_LT(ssd.target_wait_s, 0.25 * sd.target_wait_s);
  // Same outcomes sampled from the same seed: same tokens.
  EXPECT_EQ(ssd.tokens, sd.tokens);
}

TEST(Timeline, MoreDrafterRanksDraftMoreBranchesBeforeTheCut) {
  // The drafter answers misses (--miss-at drafter): a hit in another rank's share, pushed with
  // the install, counts when it comes after the verification. Under --miss-at leader past b*
  // such a late hit is drafted by the leader instead (LeaderMiss.*).
  SimConfig c = h100_config();
  c.ssd.miss_at_leader = false;
  c.work.batch = 16;
  c.ssd.budget = 64;
  c.ssd.chunk = 16;
  c.cluster.drafters = 1;
  const SimResult one = simulate(SimMode::kSsd, c);
  c.cluster.drafters = 4;
  const SimResult four = simulate(SimMode::kSsd, c);
  EXPECT_LT(one.branches_drafted, one.branches_planned);  // cut short with one rank
  EXPECT_GT(double(four.branches_drafted) / double(four.branches_planned),
            double(one.branches_drafted) / double(one.branches_planned));
  EXPECT_GE(four.hit_rate(), one.hit_rate());
}

TEST(Timeline, SameSeedSameRun) {
  const SimResult a = simulate(SimMode::kSsd, h100_config());
  const SimResult b = simulate(SimMode::kSsd, h100_config());
  EXPECT_EQ(a.seconds, b.seconds);
  EXPECT_EQ(a.hits, b.hits);
}

TEST(ChromeTrace, CompleteEventsPerRankAndRole) {
  SimConfig c = h100_config();
  c.record_events = true;
  const SimResult r = simulate(SimMode::kSsd, c);
  const nlohmann::json j = chrome_trace(r.events, "sim");
  bool verify = false, prespec = false;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] != "X") continue;
    EXPECT_GE(e["dur"].get<double>(), 0);
    if (e["name"] == "verify") {
      verify = true;
      EXPECT_LT(e["pid"].get<int>(), 4);
    }
    if (e["name"] == "prespec") {
      prespec = true;
      EXPECT_EQ(e["pid"].get<int>(), 4);
    }
  }
  EXPECT_TRUE(verify);
  EXPECT_TRUE(prespec);
}

TEST(ImpossibleConfigs, SimulatorRejectsThem) {
  SimConfig c = h100_config();
  c.cluster.tp = 3;
  EXPECT_THROW(simulate(SimMode::kAr, c), Error);
  c = h100_config();
  c.cluster.tp = 1;  // 140 GB of weights on one 80 GB H100
  try {
    simulate(SimMode::kAr, c);
    FAIL() << "a model larger than the device was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("do not fit"), std::string::npos) << e.what();
  }
  c = h100_config();
  c.cluster.drafter_link.bw_Bps = 0;
  EXPECT_THROW(simulate(SimMode::kSd, c), Error);
  c = h100_config();
  c.cluster.colocated = true;
  EXPECT_THROW(simulate(SimMode::kSsd, c), Error);
}

}  // namespace
}  // namespace ssd::sim
