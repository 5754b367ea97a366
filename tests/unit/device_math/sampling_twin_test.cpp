// The device sampler's and verifier's arithmetic (kernels/common/sampling_math.h) against the
// CPU sampler (runtime/sampling) and verifier (runtime/spec). Tolerance: none. These twins exist
// so that the device draws the same tokens as the CPU, so every comparison is exact.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "kernels/common/blocked_scan.h"
#include "kernels/common/sampling_math.h"
#include "runtime/sampling/philox.h"
#include "runtime/sampling/sampler.h"
#include "runtime/sampling/vocab_scan.h"
#include "runtime/spec/draft_tree.h"
#include "runtime/spec/verify.h"

namespace ssd {
namespace {

TEST(SamplingTwin, PhiloxUniformIsBitIdentical) {
  std::mt19937_64 rng(1);
  for (int i = 0; i < 200000; ++i) {
    const uint64_t seed = rng(), stream = i % 3 == 0 ? rng() : rng() % 16;
    const uint32_t step = static_cast<uint32_t>(rng()), lane = static_cast<uint32_t>(rng() % 128);
    ASSERT_EQ(kernels::hd::philox_uniform(seed, stream, step, lane),
              philox_uniform(seed, stream, step, lane))
        << seed << " " << stream << " " << step << " " << lane;
  }
}

TEST(SamplingTwin, RelativeExpAndOrderKeysAreBitIdentical) {
  std::mt19937 rng(2);
  std::normal_distribution<float> g(0.0f, 20.0f);
  const float inf = INFINITY;
  std::vector<float> logits = {0.0f, -0.0f, -inf, NAN, -1e30f, 1e-30f};
  for (int i = 0; i < 300000; ++i) logits.push_back(g(rng));
  for (double t : {0.05, 0.7, 1.0, 3.0}) {
    for (size_t i = 0; i < logits.size(); ++i) {
      const float l_max = 60.0f;
      const double a = kernels::hd::relative_exp_one(logits[i], l_max, t);
      const double b = sampling_detail::relative_exp_one(logits[i], l_max, t);
      ASSERT_EQ(kernels::hd::f64_bits(a), kernels::hd::f64_bits(b)) << logits[i] << " t " << t;
    }
  }
  for (size_t i = 0; i < logits.size(); ++i)
    ASSERT_EQ(kernels::hd::order_key(logits[i], static_cast<int32_t>(i)),
              sampling_detail::order_key(logits[i], static_cast<int32_t>(i)));
}

std::vector<float> random_logits(int32_t n, std::mt19937& rng, float sigma) {
  std::normal_distribution<float> g(0.0f, sigma);
  std::vector<float> l(n);
  for (auto& x : l) x = g(rng);
  return l;
}

// The blocked inverse CDF over a processed list, and the blocked top-p count over the sorted e,
// give what the CPU sampler gives, for many uniforms and settings (vocabulary 1000 and 49152).
TEST(SamplingTwin, InverseCdfAndTopPCountMatchTheSampler) {
  namespace hd = kernels::hd;
  std::mt19937 rng(3);
  for (int32_t vocab : {1000, 49152}) {
    for (float top_p : {1.0f, 0.9f, 0.5f}) {
      SamplerConfig cfg{.temperature = 0.8f, .top_p = top_p, .seed = 7};
      const auto logits = random_logits(vocab, rng, 3.0f);
      const ProcessedDist d = process(logits.data(), vocab, cfg);
      const auto n = static_cast<int64_t>(d.size());
      auto p = [&](int64_t k) { return d.tokens[k].prob; };
      std::vector<double> pre(static_cast<size_t>(hd::scan_chunks(n)));
      hd::chunk_prefix(n, p, pre.data());
      for (uint32_t step = 0; step < 500; ++step) {
        const double u = philox_uniform(cfg.seed, 0, step, kLaneToken);
        const int64_t i = hd::blocked_inverse_cdf(pre.data(), n, p, u);
        ASSERT_EQ(d.tokens[i].id, sample(d, u)) << "vocab " << vocab << " step " << step;
      }
      if (top_p < 1) {
        // The device order: every token's e, sorted by order key, Z summed as the CPU sums it.
        std::vector<uint64_t> keys;
        std::vector<double> e(vocab), x(vocab);
        const float l_max = sampling_detail::max_logit(logits.data(), vocab);
        const double z =
            sampling_detail::relative_exp(logits.data(), vocab, l_max, cfg.temperature, e.data(),
                                          x.data());
        for (int32_t k = 0; k < vocab; ++k) keys.push_back(hd::order_key(logits[k], k));
        std::sort(keys.begin(), keys.end());
        auto e_of = [&](int64_t k) { return e[hd::order_key_id(keys[k])]; };
        std::vector<double> list_pre(static_cast<size_t>(hd::scan_chunks(vocab)));
        hd::chunk_prefix(vocab, e_of, list_pre.data());
        const int64_t keep = hd::blocked_top_p_count(list_pre.data(), vocab, e_of, top_p * z);
        ASSERT_EQ(keep, n) << "vocab " << vocab << " p " << top_p;
      }
    }
  }
}

// A chain verifier written only with the twin rule (accept when u z q < m; on rejection
// m <- max(0, m - z q), z <- sum; the emitted token from the residual in p's order) gives the
// same emitted tokens as ssd::verify_with_dists for random p and q.
TEST(SamplingTwin, RejectionRuleReproducesTheVerifier) {
  std::mt19937 rng(4);
  const int32_t vocab = 50;
  const SamplerConfig cfg{.temperature = 1.0f, .seed = 3};
  int rejections = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const int k = 1 + trial % 4;
    std::vector<ProcessedDist> p(k + 1), q(k);
    std::vector<int32_t> toks(k);
    for (int i = 0; i <= k; ++i) {
      const auto lp = random_logits(vocab, rng, 1.5f);
      p[i] = process(lp.data(), vocab, cfg);
    }
    for (int i = 0; i < k; ++i) {
      const auto lq = random_logits(vocab, rng, 1.5f);
      q[i] = process(lq.data(), vocab, cfg);
      toks[i] = sample(q[i], philox_uniform(99, trial, i, kLaneDrafter));
    }
    const DraftTree tree = DraftTree::chain(toks, q);
    const VerifyRng vr{.seed = 5, .stream = static_cast<uint64_t>(trial), .position = 10};
    const VerifyResult want = verify_with_dists(tree, p, vr);

    std::vector<int32_t> got;
    int d = 0;
    for (;; ++d) {
      const ProcessedDist& pd = p[d];
      std::vector<double> m(pd.size());
      for (size_t e = 0; e < pd.size(); ++e) m[e] = pd.tokens[e].prob;
      const uint32_t pos = vr.position + d;
      if (d == k) {  // after an accepted leaf: the bonus draw from p (kLaneToken)
        got.push_back(sample(pd, philox_uniform(vr.seed, vr.stream, pos, kLaneToken)));
        break;
      }
      const double u = philox_uniform(vr.seed, vr.stream, pos, accept_lane(0));
      double z = 1, mass_x = 0;
      for (size_t e = 0; e < pd.size(); ++e)
        if (pd.tokens[e].id == toks[d]) mass_x = m[e];
      if (kernels::hd::residual_accepts(u, z, q[d].prob_of(toks[d]), mass_x)) {
        got.push_back(toks[d]);
        continue;
      }
      ++rejections;
      // Residual::reject: q's entries in q's order, the removed mass subtracted from z (a
      // fresh sum only after cancellation).
      double removed = 0;
      for (const TokenProb& t : q[d].tokens) {
        for (size_t e = 0; e < pd.size(); ++e) {
          if (pd.tokens[e].id != t.id) continue;
          const double now = kernels::hd::residual_after_reject(m[e], z, t.prob);
          removed += m[e] - now;
          m[e] = now;
        }
      }
      double nz = z - removed;
      if (!(nz > 1e-3 * z)) {
        nz = 0;
        for (const double v : m) nz += v;
      }
      const double ur = philox_uniform(vr.seed, vr.stream, pos, kLaneResidual);
      const int64_t i = kernels::hd::inverse_cdf(
          static_cast<int64_t>(m.size()), [&](int64_t e) { return m[e]; }, ur, nz);
      got.push_back(pd.tokens[i].id);
      break;
    }
    ASSERT_EQ(got, want.emitted) << "trial " << trial;
  }
  EXPECT_GT(rejections, 50);  // the residual path was exercised
}

}  // namespace
}  // namespace ssd
