// process() at the real vocabulary size (49152): the fast top-k / top-p paths must give exactly
// the support of the naive full-sort reference, and the time per call is printed for the record
// (not asserted: the machine is shared).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <vector>

#include "runtime/sampling/sampler.h"
#include "tests/unit/sampling/reference_sampler.h"

namespace ssd {
namespace {

constexpr int32_t kVocab = 49152;

// LLM-like logits: a Gaussian bulk (Box-Muller on Philox uniforms) with sd 2, plus a handful of
// strong candidates, so that top-p 0.9 keeps tens to thousands of tokens depending on T.
std::vector<float> llm_like_logits(uint64_t stream) {
  std::vector<float> l(kVocab);
  for (int32_t i = 0; i < kVocab; ++i) {
    const double u1 = philox_uniform(5, stream, static_cast<uint32_t>(i), 0);
    const double u2 = philox_uniform(5, stream, static_cast<uint32_t>(i), 1);
    l[i] = static_cast<float>(2 * std::sqrt(-2 * std::log1p(-u1)) * std::cos(6.283185307 * u2));
  }
  for (int32_t j = 0; j < 8; ++j) l[(j * 6151 + 17) % kVocab] = 9.0f - static_cast<float>(j);
  return l;
}

SamplerConfig cfg(float t, int32_t k, float p, float m) {
  SamplerConfig c;
  c.temperature = t;
  c.top_k = k;
  c.top_p = p;
  c.min_p = m;
  return c;
}

// Supports must be identical to the reference (ids and order); probabilities within 1e-12
// relative (double vs long double, ~1e-14 observed at this size).
TEST(ProcessVocab, FastPathsMatchReference) {
  const SamplerConfig configs[] = {
      cfg(1, 0, 0.9f, 0),    cfg(0.7f, 0, 0.95f, 0), cfg(2, 0, 0.5f, 0),
      cfg(4, 0, 0.99f, 0),   cfg(1, 40, 1, 0),       cfg(1, 40, 0.9f, 0),
      cfg(1.5f, 0, 0.9f, 0.02f), cfg(1, 0, 1, 0),    cfg(3, 1000, 0.8f, 0),
      cfg(1, 0, 1, 0.05f),   cfg(0.5f, 0, 1, 0.001f), cfg(2, 100, 1, 0.01f),
  };
  int compared = 0;
  for (uint64_t stream = 0; stream < 2; ++stream) {
    const auto l = llm_like_logits(stream);
    for (const auto& c : configs) {
      const auto ref = testing::reference_process(l, c);
      if (ref.top_p_margin < 1e-9) continue;  // too close to a boundary to demand equality
      const auto got = process(l.data(), kVocab, c);
      SCOPED_TRACE(::testing::Message() << "T " << c.temperature << " k " << c.top_k << " p "
                                        << c.top_p << " min_p " << c.min_p);
      ASSERT_EQ(got.size(), ref.tokens.size());
      for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_EQ(got.tokens[i].id, ref.tokens[i].id) << "position " << i;
        const double want = static_cast<double>(ref.tokens[i].prob);
        ASSERT_NEAR(got.tokens[i].prob, want, 1e-12 * want) << "position " << i;
      }
      ++compared;
    }
  }
  EXPECT_EQ(compared, 2 * static_cast<int>(std::size(configs)));  // none too near a boundary
}

TEST(ProcessVocab, TimePerCall) {
  const auto l = llm_like_logits(0);
  struct Case {
    const char* name;
    SamplerConfig c;
    size_t min_support, max_support;  // sanity range of the support size
  } cases[] = {{"greedy", cfg(0, 0, 1, 0), 1, 1},
               {"temperature 1 only", cfg(1, 0, 1, 0), kVocab, kVocab},
               {"top-k 40, T 1", cfg(1, 40, 1, 0), 40, 40},
               {"top-p 0.9, T 1", cfg(1, 0, 0.9f, 0), 2, kVocab - 1},
               {"top-p 0.9, T 0.7", cfg(0.7f, 0, 0.9f, 0), 2, kVocab - 1},
               {"min-p 0.05, T 1", cfg(1, 0, 1, 0.05f), 2, kVocab - 1}};
  for (const auto& k : cases) {
    size_t support = process(l.data(), kVocab, k.c).size();  // warm-up
    // The fastest of a few calls: on a shared machine the mean mostly measures other processes.
    double best_us = 1e30;
    for (int r = 0; r < 20; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      support = process(l.data(), kVocab, k.c).size();
      best_us = std::min(best_us, std::chrono::duration<double, std::micro>(
                                      std::chrono::steady_clock::now() - t0).count());
    }
    std::printf("[ timing ] process(), vocab %d, %-20s %8.1f us/call (best of 20; support %zu)\n",
                kVocab, k.name, best_us, support);
    EXPECT_GE(support, k.min_support) << k.name;
    EXPECT_LE(support, k.max_support) << k.name;
  }
}

}  // namespace
}  // namespace ssd
