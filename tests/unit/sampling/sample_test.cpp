// sample() and Sampler: inverse-CDF edge cases, a chi-square goodness-of-fit test of 200k seeded
// draws against process(), the same test failing for deliberately wrong samplers, and
// reproducibility of the (seed, stream, step) addressing.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "runtime/core/error.h"
#include "runtime/sampling/sampler.h"

namespace ssd {
namespace {

ProcessedDist make_dist(std::vector<TokenProb> t) {
  ProcessedDist d;
  d.tokens = std::move(t);
  return d;
}

TEST(Sample, InverseCdfBoundaries) {
  const auto d = make_dist({{7, 0.5}, {3, 0.25}, {9, 0.25}});
  EXPECT_EQ(sample(d, 0.0), 7);
  EXPECT_EQ(sample(d, 0.4999999), 7);
  EXPECT_EQ(sample(d, 0.5), 3);  // u exactly at a cumulative boundary goes to the next token
  EXPECT_EQ(sample(d, 0.7499999), 3);
  EXPECT_EQ(sample(d, 0.75), 9);
  EXPECT_EQ(sample(d, 1.0 - 0x1.0p-53), 9);
  EXPECT_THROW(sample(d, 1.0), Error);
  EXPECT_THROW(sample(d, -0.1), Error);
  EXPECT_THROW(sample(ProcessedDist{}, 0.5), Error);
}

TEST(Sample, ScalesByTheListTotal) {
  // A list that does not sum to 1 (e.g. a caller-built residual) is drawn in proportion.
  const auto d = make_dist({{1, 2.0}, {2, 6.0}});
  EXPECT_EQ(sample(d, 0.2499), 1);
  EXPECT_EQ(sample(d, 0.2501), 2);
}

// ---- chi-square goodness of fit ----
//
// 200k draws with u = Philox(seed 2024, stream 11, step i), over the 25-token distribution of
// process() below (smallest expected count ~380, so the chi-square approximation holds).
// Significance 0.001 with 24 degrees of freedom: critical value 51.179 (upper 0.1% point of
// chi-square(24), computed from the regularised incomplete gamma function and matching printed
// tables). The draws are seeded, so the outcome is deterministic; a correct sampler would fail at
// a given seed with probability 0.001.
constexpr int kDraws = 200000;
constexpr double kCritical24 = 51.179;

std::vector<float> fit_logits() {
  std::vector<float> l(30);
  for (int i = 0; i < 30; ++i) l[(i * 7) % 30] = -0.15f * static_cast<float>(i);  // scattered ids
  return l;
}

SamplerConfig fit_config() {
  SamplerConfig c;
  c.temperature = 0.8f;
  c.top_k = 25;
  c.seed = 2024;
  return c;
}

template <class Draw>
double chi_square(const ProcessedDist& expected, Draw draw) {
  std::vector<double> count(64, 0);
  for (int i = 0; i < kDraws; ++i) {
    const int32_t id = draw(philox_uniform(2024, 11, static_cast<uint32_t>(i)));
    if (id >= 0 && id < 64) count[id] += 1;
  }
  double stat = 0, seen = 0;
  for (const auto& t : expected.tokens) {
    const double e = t.prob * kDraws;
    stat += (count[t.id] - e) * (count[t.id] - e) / e;
    seen += count[t.id];
  }
  // Draws outside the expected support are impossible events: make them fail the test outright.
  return seen == kDraws ? stat : 1e300;
}

TEST(Sample, ChiSquareFitsProcessedDistribution) {
  const auto l = fit_logits();
  const auto dist = process(l.data(), 30, fit_config());
  ASSERT_EQ(dist.size(), 25u);
  ASSERT_GT(dist.tokens.back().prob * kDraws, 300.0);
  const double stat = chi_square(dist, [&](double u) { return sample(dist, u); });
  EXPECT_LT(stat, kCritical24);
  // The Sampler class draws the same tokens from the same addresses.
  const Sampler s(fit_config());
  const double stat2 = chi_square(dist, [&, i = 0u](double) mutable {
    return s.sample(l.data(), 30, 11, i++);
  });
  EXPECT_EQ(stat2, stat);
}

TEST(Sample, ChiSquareRejectsOffByOneCdf) {
  const auto l = fit_logits();
  const auto dist = process(l.data(), 30, fit_config());
  // Wrong: returns the token after the one whose CDF interval holds u (clamped at the end).
  auto off_by_one = [&](double u) {
    double run = 0;
    for (size_t i = 0; i < dist.size(); ++i) {
      run += dist.tokens[i].prob;
      if (u < run) return dist.tokens[std::min(i + 1, dist.size() - 1)].id;
    }
    return dist.tokens.back().id;
  };
  EXPECT_GT(chi_square(dist, off_by_one), kCritical24);
}

TEST(Sample, ChiSquareRejectsWrongTemperature) {
  // Wrong: draws at temperature 0.75 instead of 0.8, a 7% error in the logit scale.
  const auto l = fit_logits();
  const auto dist = process(l.data(), 30, fit_config());
  SamplerConfig wrong = fit_config();
  wrong.temperature = 0.75f;
  const auto wrong_dist = process(l.data(), 30, wrong);
  EXPECT_GT(chi_square(dist, [&](double u) { return sample(wrong_dist, u); }), kCritical24);
}

// ---- reproducibility ----

std::vector<float> flat_logits(int n) {
  std::vector<float> l(n);
  for (int i = 0; i < n; ++i) l[i] = 0.01f * static_cast<float>(i % 5);
  return l;
}

TEST(SamplerClass, SameAddressSameTokenWhateverTheCallOrder) {
  SamplerConfig c;
  c.temperature = 1;
  c.seed = 77;
  const Sampler a(c), b(c);
  const auto l = flat_logits(1000);
  std::vector<int32_t> forward, backward(64);
  for (uint32_t s = 0; s < 64; ++s) forward.push_back(a.sample(l.data(), 1000, 5, s));
  for (uint32_t s = 64; s-- > 0;) backward[s] = b.sample(l.data(), 1000, 5, s);
  EXPECT_EQ(forward, backward);
}

TEST(SamplerClass, StreamsAndSeedsGiveDifferentSequences) {
  SamplerConfig c;
  c.temperature = 1;
  c.seed = 77;
  const Sampler s(c);
  c.seed = 78;
  const Sampler other_seed(c);
  const auto l = flat_logits(1000);
  std::vector<int32_t> s0, s1, seed2;
  for (uint32_t step = 0; step < 32; ++step) {
    s0.push_back(s.sample(l.data(), 1000, 0, step));
    s1.push_back(s.sample(l.data(), 1000, 1, step));
    seed2.push_back(other_seed.sample(l.data(), 1000, 0, step));
  }
  // With ~1000 near-equiprobable tokens, equal 32-token sequences would mean the address is
  // ignored (chance ~1e-96 otherwise); count matches, expecting about 32/1000.
  int same_stream = 0, same_seed = 0;
  for (int i = 0; i < 32; ++i) {
    same_stream += s0[i] == s1[i];
    same_seed += s0[i] == seed2[i];
  }
  EXPECT_LE(same_stream, 3);
  EXPECT_LE(same_seed, 3);
}

TEST(SamplerClass, GreedyIgnoresTheAddress) {
  const Sampler g(SamplerConfig{});
  const std::vector<float> l = {0.5f, 2.0f, 2.0f, -1.0f};
  for (uint32_t step = 0; step < 8; ++step) EXPECT_EQ(g.sample(l.data(), 4, step, step), 1);
}

}  // namespace
}  // namespace ssd
