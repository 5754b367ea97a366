// The server's in-process SD engine (LocalEngine) with the speculation-length policy: under
// --k auto and under a fixed --k, with sequences joining and leaving between rounds, greedy output
// equals AR's token for token; the lengths it chose reach ssd:spec_length_chosen, and under auto
// they follow the policy (its warm-up asks K, then 1, then K, ...: a fixed K never asks 1 of a
// request far from its end).
#include <gtest/gtest.h>

#include "actors/serve/local_engine.h"
#include "tests/unit/serve/engine_fixture.h"
#include "tests/unit/serve/serve_fixture.h"

namespace ssd {
namespace {

class LocalEngineLengths : public ::testing::TestWithParam<bool> {};

TEST_P(LocalEngineLengths, GreedyEqualsArAndChosenLengthsReachMetrics) {
  const bool automatic = GetParam();
  constexpr int32_t kK = 3;
  constexpr size_t kRequests = 4;
  test::EngineCase c(kRequests, 12);

  ServeMetrics metrics("tiny", kK);
  LocalEngine eng(c.target, c.drafter.get(),
                  SpecLengthOptions{.k_max = kK, .automatic = automatic}, metrics);
  EXPECT_EQ(eng.k(), kK);
  EXPECT_EQ(eng.extra_positions(), kK);
  test::EngineDriver d(eng, c.reqs);
  d.admit({0});
  d.round();  // request 0 alone, 12 tokens to go: a fixed K asks K twice
  d.round();
  ASSERT_TRUE(d.slots[0].running);
  const std::string early = metrics.prometheus_text();
  EXPECT_EQ(test::metric(early, "ssd:spec_length_chosen_count"), 2);
  EXPECT_EQ(test::metric(early, "ssd:spec_length_chosen_bucket", "le=\"1\""), automatic ? 1 : 0);
  EXPECT_EQ(test::metric(early, "ssd:spec_length_chosen_bucket", "le=\"3\""), 2);
  d.admit({1, 2});  // join the running batch
  d.round();
  d.admit({3});
  for (int r = 0; r < 200 && !d.running.empty(); ++r) d.round();
  ASSERT_TRUE(d.running.empty());
  for (size_t i = 0; i < kRequests; ++i) {
    EXPECT_EQ(d.slots[i].gen.tokens, c.ar[i].tokens) << "request " << i;
    EXPECT_EQ(d.slots[i].kv, -1) << "request " << i << " still holds its KV sequence";
  }
  EXPECT_EQ(c.tiny.engine->kv->pages_in_use(), 0);
  const std::string text = metrics.prometheus_text();
  // One chosen length per sequence-round, each in 0..K.
  EXPECT_EQ(test::metric(text, "ssd:spec_length_chosen_count"), d.sequence_rounds);
  EXPECT_EQ(test::metric(text, "ssd:spec_length_chosen_bucket", "le=\"+Inf\""),
            d.sequence_rounds);
  EXPECT_EQ(test::metric(text, "ssd:spec_length_chosen_bucket", "le=\"3\""), d.sequence_rounds);
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
  s.req = test::split::staggered_request(0, 12);
  Slot* p = &s;
  eng.admit({&p, 1});
  for (int r = 0; r < 50 && s.running; ++r) eng.round({&p, 1});
  EXPECT_FALSE(s.running);
  EXPECT_EQ(test::metric(metrics.prometheus_text(), "ssd:spec_length_chosen_count"), -1);
}

}  // namespace
}  // namespace ssd
