// The server's in-process SD engine (LocalEngine) with the speculation-length policy: under
// --k auto and under a fixed --k, with sequences joining and leaving between rounds, greedy output
// equals AR's token for token; the lengths it chose reach ssd:spec_length_chosen, and under auto
// they follow the policy (its warm-up asks K, then 1, then K, ...: a fixed K never asks 1 of a
// request far from its end).
#include <gtest/gtest.h>

#include "actors/serve/local_engine.h"
#include "tests/unit/actors/split_fixture.h"
#include "tests/unit/serve/serve_fixture.h"

namespace ssd {
namespace {

GenerationRequest request(size_t i) {
  GenerationRequest r;
  for (size_t t = 0; t < 4 + 3 * i; ++t) r.prompt.push_back(static_cast<int32_t>(9 + 5 * t + i));
  r.max_new_tokens = 12 + 4 * static_cast<int64_t>(i);
  r.stream = i;
  return r;
}

class LocalEngineLengths : public ::testing::TestWithParam<bool> {};

TEST_P(LocalEngineLengths, GreedyEqualsArAndChosenLengthsReachMetrics) {
  const bool automatic = GetParam();
  constexpr int32_t kK = 3;
  test::split::TinyTarget tiny;
  test::drafting::Engine& target_engine = *tiny.engine;
  const std::unique_ptr<Drafter> drafter = tiny.self_drafter();

  constexpr size_t kRequests = 4;
  std::vector<GenerationRequest> reqs;
  for (size_t i = 0; i < kRequests; ++i) reqs.push_back(request(i));
  LocalTarget target(*target_engine.model, *target_engine.kv);
  const std::vector<GenerationResult> ar = generate_ar_batch(target, reqs);

  ServeMetrics metrics("tiny", kK);
  LocalEngine eng(target, drafter.get(), SpecLengthOptions{.k_max = kK, .automatic = automatic},
                  metrics);
  EXPECT_EQ(eng.k(), kK);
  EXPECT_EQ(eng.extra_positions(), kK);
  std::vector<Slot> slots(kRequests);
  for (size_t i = 0; i < slots.size(); ++i) {
    slots[i].id = static_cast<int64_t>(i + 1);
    slots[i].req = reqs[i];
  }
  std::vector<Slot*> running;
  auto admit = [&](std::initializer_list<size_t> which) {
    std::vector<Slot*> joining;
    for (size_t i : which) joining.push_back(&slots[i]);
    eng.admit(joining);
    for (Slot* s : joining)
      if (s->running) running.push_back(s);
  };
  int64_t sequence_rounds = 0;
  auto round = [&] {
    sequence_rounds += static_cast<int64_t>(running.size());
    eng.round(running);
    std::erase_if(running, [](Slot* s) { return !s->running; });
  };
  admit({0});
  round();  // request 0 alone, 12 tokens to go: a fixed K asks K twice
  round();
  ASSERT_TRUE(slots[0].running);
  const std::string early = metrics.prometheus_text();
  EXPECT_EQ(test::metric(early, "ssd:spec_length_chosen_count"), 2);
  EXPECT_EQ(test::metric(early, "ssd:spec_length_chosen_bucket", "le=\"1\""), automatic ? 1 : 0);
  EXPECT_EQ(test::metric(early, "ssd:spec_length_chosen_bucket", "le=\"3\""), 2);
  admit({1, 2});  // join the running batch
  round();
  admit({3});
  for (int r = 0; r < 200 && !running.empty(); ++r) round();
  ASSERT_TRUE(running.empty());
  for (size_t i = 0; i < kRequests; ++i) {
    EXPECT_EQ(slots[i].gen.tokens, ar[i].tokens) << "request " << i;
    EXPECT_EQ(slots[i].kv, -1) << "request " << i << " still holds its KV sequence";
  }
  EXPECT_EQ(target_engine.kv->pages_in_use(), 0);
  const std::string text = metrics.prometheus_text();
  // One chosen length per sequence-round, each in 0..K.
  EXPECT_EQ(test::metric(text, "ssd:spec_length_chosen_count"), sequence_rounds);
  EXPECT_EQ(test::metric(text, "ssd:spec_length_chosen_bucket", "le=\"+Inf\""), sequence_rounds);
  EXPECT_EQ(test::metric(text, "ssd:spec_length_chosen_bucket", "le=\"3\""), sequence_rounds);
  EXPECT_GT(test::metric(text, "ssd:spec_decode_num_accepted_tokens_total"), 0);
}

INSTANTIATE_TEST_SUITE_P(KChoice, LocalEngineLengths, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "auto" : "fixed"; });

TEST(LocalEngineLengths, ArEngineHasNoLengthHistogram) {
  test::split::TinyTarget tiny;
  LocalTarget target(*tiny.engine->model, *tiny.engine->kv);
  ServeMetrics metrics("tiny", 0);
  LocalEngine eng(target, nullptr, SpecLengthOptions{.k_max = 4, .automatic = true}, metrics);
  EXPECT_EQ(eng.k(), 0);
  Slot s;
  s.id = 1;
  s.req = request(0);
  Slot* p = &s;
  eng.admit({&p, 1});
  for (int r = 0; r < 50 && s.running; ++r) eng.round({&p, 1});
  EXPECT_FALSE(s.running);
  EXPECT_EQ(test::metric(metrics.prometheus_text(), "ssd:spec_length_chosen_count"), -1);
}

}  // namespace
}  // namespace ssd
