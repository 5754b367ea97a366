// argmax and process(): exact supports on hand-made logits, probabilities against the long double
// reference (reference_sampler.h), special values, and config validation.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "runtime/core/error.h"
#include "runtime/sampling/sampler.h"
#include "tests/unit/sampling/reference_sampler.h"

namespace ssd {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

std::vector<int32_t> ids_of(const ProcessedDist& d) {
  std::vector<int32_t> ids;
  for (const auto& t : d.tokens) ids.push_back(t.id);
  return ids;
}

ProcessedDist run(const std::vector<float>& l, SamplerConfig c) {
  return process(l.data(), static_cast<int32_t>(l.size()), c);
}

SamplerConfig temp(float t) {
  SamplerConfig c;
  c.temperature = t;
  return c;
}

// Logits whose softmax at T = 1 is exactly proportional to {0.5, 0.3, 0.15, 0.05} (id 0..3),
// listed out of order (ids 2, 0, 3, 1) so that the output order is really a sort.
std::vector<float> four_level_logits() {
  return {std::log(0.15f), std::log(0.5f), std::log(0.05f), std::log(0.3f)};
}
// ids by descending probability for the logits above
constexpr int32_t kP50 = 1, kP30 = 3, kP15 = 0, kP05 = 2;

TEST(Argmax, LowestIdWinsTies) {
  const std::vector<float> l = {1, 3, 2, 3, 0};
  EXPECT_EQ(argmax(l.data(), 5), 1);
  const std::vector<float> flat(7, -2.5f);
  EXPECT_EQ(argmax(flat.data(), 7), 0);
}

TEST(Argmax, SkipsNaNAndHandlesInfinities) {
  const std::vector<float> l = {kNaN, -kInf, 0.5f, kNaN, 0.25f};
  EXPECT_EQ(argmax(l.data(), 5), 2);
  const std::vector<float> with_inf = {1, kInf, kNaN, kInf};
  EXPECT_EQ(argmax(with_inf.data(), 4), 1);
  const std::vector<float> all_neg_inf = {-kInf, -kInf};
  EXPECT_EQ(argmax(all_neg_inf.data(), 2), 0);
  const std::vector<float> all_nan = {kNaN, kNaN};
  EXPECT_THROW(argmax(all_nan.data(), 2), Error);
  EXPECT_THROW(argmax(l.data(), 0), Error);
}

TEST(Process, GreedyIsOneHotAtArgmaxWhateverTheFilters) {
  SamplerConfig c;  // temperature 0
  c.top_k = 3;
  c.top_p = 0.5f;
  c.min_p = 0.2f;
  const auto d = run({0.1f, 2.0f, kNaN, 2.0f, -1.0f}, c);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d.tokens[0].id, 1);
  EXPECT_EQ(d.tokens[0].prob, 1.0);
}

TEST(Process, TemperatureOnlyKeepsAllSortedByProbThenId) {
  const auto d = run({1, 3, 2, 3, 0}, temp(1));
  EXPECT_EQ(ids_of(d), (std::vector<int32_t>{1, 3, 2, 0, 4}));
  EXPECT_EQ(d.tokens[0].prob, d.tokens[1].prob);
}

TEST(Process, TopKSupportWithTies) {
  SamplerConfig c = temp(1);
  c.top_k = 2;
  EXPECT_EQ(ids_of(run({1, 3, 2, 3, 0}, c)), (std::vector<int32_t>{1, 3}));
  c.top_k = 1;  // tie at the cut: the lower id survives
  EXPECT_EQ(ids_of(run({1, 3, 2, 3, 0}, c)), (std::vector<int32_t>{1}));
  c.top_k = 3;
  EXPECT_EQ(ids_of(run({1, 3, 2, 3, 0}, c)), (std::vector<int32_t>{1, 3, 2}));
  c.top_k = 10;  // more than the vocabulary: off
  EXPECT_EQ(run({1, 3, 2, 3, 0}, c).size(), 5u);
}

TEST(Process, TopPKeepsSmallestPrefixReachingP) {
  // cumulative masses in order: 0.5, 0.8, 0.95, 1.0; each p is at least 0.02 from a boundary.
  const auto l = four_level_logits();
  SamplerConfig c = temp(1);
  c.top_p = 0.4f;
  EXPECT_EQ(ids_of(run(l, c)), (std::vector<int32_t>{kP50}));
  c.top_p = 0.75f;
  EXPECT_EQ(ids_of(run(l, c)), (std::vector<int32_t>{kP50, kP30}));
  c.top_p = 0.82f;
  EXPECT_EQ(ids_of(run(l, c)), (std::vector<int32_t>{kP50, kP30, kP15}));
  c.top_p = 0.97f;
  EXPECT_EQ(run(l, c).size(), 4u);
  const auto d = run(l, [] {
    SamplerConfig c2 = temp(1);
    c2.top_p = 0.75f;
    return c2;
  }());
  EXPECT_NEAR(d.tokens[0].prob, 0.5 / 0.8, 1e-7);  // renormalised; float logits: ~1e-7
  EXPECT_NEAR(d.tokens[1].prob, 0.3 / 0.8, 1e-7);
}

TEST(Process, TopPMeasuresMassAfterTopK) {
  // After top-3 the masses are 0.5, 0.3, 0.15 / 0.95 = 0.526, 0.842, 1: p = 0.82 keeps two.
  // Without top-k it keeps three (see above), so this fails if top-k does not renormalise.
  SamplerConfig c = temp(1);
  c.top_k = 3;
  c.top_p = 0.82f;
  EXPECT_EQ(ids_of(run(four_level_logits(), c)), (std::vector<int32_t>{kP50, kP30}));
}

TEST(Process, MinPRelativeToTopProbability) {
  const auto l = four_level_logits();
  SamplerConfig c = temp(1);
  c.min_p = 0.2f;  // keep p >= 0.1
  EXPECT_EQ(ids_of(run(l, c)), (std::vector<int32_t>{kP50, kP30, kP15}));
  c.min_p = 0.5f;  // keep p >= 0.25
  EXPECT_EQ(ids_of(run(l, c)), (std::vector<int32_t>{kP50, kP30}));
  c.min_p = 1.0f;  // only the top
  EXPECT_EQ(ids_of(run(l, c)), (std::vector<int32_t>{kP50}));
}

TEST(Process, TopPMassIsMeasuredBeforeMinP) {
  // min-p 0.2 keeps {0.5, 0.3, 0.15}. Top-p 0.82 measured on the full softmax needs all three
  // (0.8 < 0.82); measured after min-p's renormalisation it would need only two (0.842).
  SamplerConfig c = temp(1);
  c.min_p = 0.2f;
  c.top_p = 0.82f;
  EXPECT_EQ(ids_of(run(four_level_logits(), c)), (std::vector<int32_t>{kP50, kP30, kP15}));
}

TEST(Process, NonFiniteLogits) {
  // -inf and NaN have probability 0 and are left out; +inf is an error.
  const auto d = run({0, -kInf, kNaN, 0}, temp(1));
  EXPECT_EQ(ids_of(d), (std::vector<int32_t>{0, 3}));
  EXPECT_DOUBLE_EQ(d.tokens[0].prob, 0.5);
  EXPECT_THROW(run({0, kInf}, temp(1)), Error);
  EXPECT_THROW(run({-kInf, kNaN}, temp(1)), Error);
}

TEST(Process, UnderflowedTokensAreDropped) {
  // exp(-2000) is 0 in double: that token cannot be drawn and is not listed.
  const auto d = run({0, -2000, -1}, temp(1));
  EXPECT_EQ(ids_of(d), (std::vector<int32_t>{0, 2}));
}

TEST(Process, RejectsInvalidConfig) {
  const std::vector<float> l = {0, 1};
  auto bad = [&](auto set) {
    SamplerConfig c = temp(1);
    set(c);
    return c;
  };
  EXPECT_THROW(run(l, bad([](SamplerConfig& c) { c.temperature = -1; })), Error);
  EXPECT_THROW(run(l, bad([](SamplerConfig& c) { c.temperature = kNaN; })), Error);
  EXPECT_THROW(run(l, bad([](SamplerConfig& c) { c.top_k = -1; })), Error);
  EXPECT_THROW(run(l, bad([](SamplerConfig& c) { c.top_p = 0; })), Error);
  EXPECT_THROW(run(l, bad([](SamplerConfig& c) { c.top_p = 1.5f; })), Error);
  EXPECT_THROW(run(l, bad([](SamplerConfig& c) { c.min_p = -0.1f; })), Error);
  EXPECT_THROW(run(l, bad([](SamplerConfig& c) { c.min_p = 2; })), Error);
  try {
    run(l, bad([](SamplerConfig& c) { c.top_p = 1.5f; }));
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("top_p"), std::string::npos) << e.what();
  }
  EXPECT_THROW(Sampler(bad([](SamplerConfig& c) { c.top_k = -3; })), Error);
}

TEST(Process, ProbOfLooksUpTheSupport) {
  const auto d = run({0, 0, std::log(2.0f)}, temp(1));
  EXPECT_NEAR(d.prob_of(2), 0.5, 1e-7);
  EXPECT_NEAR(d.prob_of(0), 0.25, 1e-7);
  EXPECT_EQ(d.prob_of(7), 0.0);
}

// Probabilities against the long double reference on small random vocabularies, over a grid of
// configurations. Supports must be identical (cases within 1e-9 of a top-p boundary would be
// skipped, none is at these seeds); probabilities agree to 1e-12 relative, which is what double
// exp and summation give (errors ~1e-15 observed).
TEST(Process, MatchesLongDoubleReference) {
  int cases = 0;
  for (uint32_t trial = 0; trial < 40; ++trial) {
    const int32_t n = 5 + static_cast<int32_t>(trial * 7 % 200);
    std::vector<float> l(n);
    for (int32_t i = 0; i < n; ++i)
      l[i] = static_cast<float>(8 * philox_uniform(99, trial, static_cast<uint32_t>(i)) - 4);
    for (float t : {0.3f, 1.0f, 2.5f})
      for (int32_t k : {0, 1, 3, 17})
        for (float p : {1.0f, 0.9f, 0.5f})
          for (float m : {0.0f, 0.05f}) {
            SamplerConfig c;
            c.temperature = t;
            c.top_k = k;
            c.top_p = p;
            c.min_p = m;
            const auto ref = testing::reference_process(l, c);
            if (ref.top_p_margin < 1e-9) continue;
            const auto got = run(l, c);
            ASSERT_EQ(got.size(), ref.tokens.size()) << "trial " << trial << " t " << t;
            for (size_t i = 0; i < got.size(); ++i) {
              ASSERT_EQ(got.tokens[i].id, ref.tokens[i].id) << "trial " << trial << " i " << i;
              const double want = static_cast<double>(ref.tokens[i].prob);
              EXPECT_NEAR(got.tokens[i].prob, want, 1e-12 * want);
            }
            ++cases;
          }
  }
  EXPECT_GT(cases, 2800);  // 40 * 72 minus skipped boundary cases
}

}  // namespace
}  // namespace ssd
