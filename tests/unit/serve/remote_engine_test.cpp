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
#include "tests/unit/actors/split_fixture.h"
#include "tests/unit/serve/serve_fixture.h"

namespace ssd {
namespace {

namespace drafting = test::drafting;

GenerationRequest request(size_t i) {
  GenerationRequest r;
  for (size_t t = 0; t < 3 + 2 * i; ++t) r.prompt.push_back(static_cast<int32_t>(5 + 7 * t + i));
  r.max_new_tokens = 10 + 3 * static_cast<int64_t>(i);
  r.stream = i;
  return r;
}

class RemoteEngineJoins : public ::testing::TestWithParam<std::tuple<bool, bool>> {};

TEST_P(RemoteEngineJoins, JoiningAndLeavingSequencesKeepGreedyOutputExact) {
  const auto [prespeculate, automatic] = GetParam();
  test::split::TinyTarget tiny;
  drafting::Engine& target_engine = *tiny.engine;
  const std::unique_ptr<Drafter> primary = tiny.self_drafter();

  constexpr size_t kRequests = 5;
  std::vector<GenerationRequest> reqs;
  for (size_t i = 0; i < kRequests; ++i) reqs.push_back(request(i));
  LocalTarget target(*target_engine.model, *target_engine.kv);
  const std::vector<GenerationResult> ar = generate_ar_batch(target, reqs);

  LoopbackHub hub(2);
  SsdDrafterOptions so;
  so.k = 3;
  so.fan_out.budget = 6;
  test::split::DrafterActorThread actor(hub, *primary, so);
  actor.ready();
  const RankLayout& leader = actor.leader_layout;
  ServeMetrics metrics("tiny", 3);
  {
    RemoteEngineOptions ro;
    ro.k = 3;
    ro.auto_k = automatic;
    ro.prespeculate = prespeculate;
    ro.step_s = 30;
    RemoteEngine eng(target, hub.endpoint(0), leader, actor.leader_dog, ro, metrics);
    std::vector<Slot> slots(kRequests + 1);
    for (size_t i = 0; i < slots.size(); ++i) {
      slots[i].id = static_cast<int64_t>(i + 1);
      slots[i].req = i < kRequests ? reqs[i] : request(1);
    }
    std::vector<Slot*> running;
    auto admit = [&](std::initializer_list<size_t> which) {
      std::vector<Slot*> joining;
      for (size_t i : which) joining.push_back(&slots[i]);
      eng.admit(joining);
      for (Slot* s : joining)
        if (s->running) running.push_back(s);
    };
    auto round = [&] {
      eng.round(running);
      std::erase_if(running, [](Slot* s) { return !s->running; });
    };
    admit({0});                                       // an idle engine: StartSeqs
    round();
    round();
    ASSERT_TRUE(slots[0].running) << "request 0 ended before the others could join it";
    const std::string early = metrics.prometheus_text();  // request 0's lengths: K, then 1 or K
    EXPECT_EQ(test::metric(early, "ssd:spec_length_chosen_count"), 2);
    EXPECT_EQ(test::metric(early, "ssd:spec_length_chosen_bucket", "le=\"1\""), automatic ? 1 : 0);
    admit({1, 5});                                    // join a running batch: JoinSeqs
    round();
    round();
    ASSERT_TRUE(slots[5].running && slots[5].gen.tokens.size() > 1);
    slots[5].running = false;                         // its client leaves mid-run: FinishSeqs
    eng.release(slots[5]);
    std::erase(running, &slots[5]);
    admit({2});
    for (int r = 0; r < 100 && !running.empty(); ++r) round();
    ASSERT_TRUE(running.empty());
    admit({3, 4});                                    // idle again: a new batch
    for (int r = 0; r < 100 && !running.empty(); ++r) {
      round();
      if (r == 1) admit({});                          // an empty boundary changes nothing
    }
    ASSERT_TRUE(running.empty());
    for (size_t i = 0; i < kRequests; ++i) {
      EXPECT_EQ(slots[i].gen.tokens, ar[i].tokens) << "request " << i;
      EXPECT_EQ(slots[i].kv, -1) << "request " << i << " still holds its KV sequence";
    }
    EXPECT_EQ(target_engine.kv->pages_in_use(), 0);  // every sequence, the one that left too, gave its pages back
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
