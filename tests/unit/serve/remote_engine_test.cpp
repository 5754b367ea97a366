// The server's SSD engine (RemoteEngine) against a real drafter actor in one process (the leader
// on the test's thread, the drafter actor on another, over the loopback transport: the frames the
// MPI transport carries), with sequences joining and leaving the running batch between rounds:
// a request admitted while others run is announced with JoinSeqs and takes part from the next
// round; one admitted when nothing runs starts a new batch (StartSeqs); one whose client leaves
// is finished mid-run (FinishSeqs). Greedy output must equal AR's token for token, in --mode ssd
// (pre-speculation, with hits from a self-drafting model) and --mode sd, each under a fixed --k
// and --k auto (the leader's length policy: every next length sent with the outcome, StartSeqs
// or JoinSeqs; its warm-up asks K, then 1, which a fixed K never asks of a long request).
#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <tuple>

#include "actors/serve/remote_engine.h"
#include "tests/unit/serve/engine_fixture.h"
#include "tests/unit/serve/serve_fixture.h"

namespace ssd {
namespace {


class RemoteEngineJoins : public ::testing::TestWithParam<std::tuple<bool, bool>> {};

TEST_P(RemoteEngineJoins, JoiningAndLeavingSequencesKeepGreedyOutputExact) {
  const auto [prespeculate, automatic] = GetParam();
  constexpr size_t kRequests = 5;
  test::EngineCase c(kRequests, 10);

  LoopbackHub hub(2);
  SsdDrafterOptions so;
  so.k = 3;
  so.fan_out.budget = 6;
  test::split::DrafterActorThread actor(hub, *c.drafter, so);
  actor.ready();
  const RankLayout& leader = actor.leader_layout;
  ServeMetrics metrics("tiny", 3);
  {
    RemoteEngineOptions ro;
    ro.k = 3;
    ro.auto_k = automatic;
    ro.prespeculate = prespeculate;
    ro.step_s = 30;
    RemoteEngine eng(c.target, hub.endpoint(0), leader, actor.leader_dog, ro, metrics);
    std::vector<GenerationRequest> reqs = c.reqs;
    reqs.push_back(c.reqs[1]);  // slot 5: request 1 again, a client that leaves mid-run
    test::EngineDriver d(eng, reqs);
    d.admit({0});                                       // an idle engine: StartSeqs
    d.round();
    d.round();
    ASSERT_TRUE(d.slots[0].running) << "request 0 ended before the others could join it";
    const std::string early = metrics.prometheus_text();  // request 0's lengths: K, then 1 or K
    EXPECT_EQ(test::metric(early, "ssd:spec_length_chosen_count"), 2);
    EXPECT_EQ(test::metric(early, "ssd:spec_length_chosen_bucket", "le=\"1\""), automatic ? 1 : 0);
    d.admit({1, 5});                                    // join a running batch: JoinSeqs
    d.round();
    d.round();
    ASSERT_TRUE(d.slots[5].running && d.slots[5].gen.tokens.size() > 1);
    d.leave(5);                                         // its client leaves mid-run: FinishSeqs
    d.admit({2});
    for (int r = 0; r < 100 && !d.running.empty(); ++r) d.round();
    ASSERT_TRUE(d.running.empty());
    d.admit({3, 4});                                    // idle again: a new batch
    for (int r = 0; r < 100 && !d.running.empty(); ++r) {
      d.round();
      if (r == 1) d.admit({});                          // an empty boundary changes nothing
    }
    ASSERT_TRUE(d.running.empty());
    for (size_t i = 0; i < kRequests; ++i) {
      EXPECT_EQ(d.slots[i].gen.tokens, c.ar[i].tokens) << "request " << i;
      EXPECT_EQ(d.slots[i].kv, -1) << "request " << i << " still holds its KV sequence";
    }
    // Every sequence, the one that left too, gave its pages back.
    EXPECT_EQ(c.tiny.engine->kv->pages_in_use(), 0);
    hub.endpoint(0).send(leader.drafter_lead(), DrafterShutdown{});
  }
  actor.join();
  const std::string text = metrics.prometheus_text();
  EXPECT_GT(test::metric(text, "ssd:spec_decode_num_accepted_tokens_total"), 0);
  const double chosen = test::metric(text, "ssd:spec_length_chosen_count");
  EXPECT_GT(chosen, 0);
  EXPECT_EQ(test::metric(text, "ssd:spec_length_chosen_bucket", "le=\"3\""), chosen);
  if (prespeculate) {  // the self-draft agrees with the target: pre-speculation hits
    EXPECT_GT(test::metric(text, "ssd:spec_decode_cache_hits_total"), 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, RemoteEngineJoins,
                         ::testing::Combine(::testing::Values(true, false),
                                            ::testing::Values(true, false)),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param) ? "ssd" : "sd") +
                                  (std::get<1>(info.param) ? "_auto" : "_fixed");
                         });

}  // namespace
}  // namespace ssd
