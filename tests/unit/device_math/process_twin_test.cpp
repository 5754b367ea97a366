// The device sampler's plan (kernels/common/process_math.h), run on the CPU with the very SSD_HD
// functions the CUDA kernels call, against ssd::process() and ssd::sample(). Tolerance: none.
// The plan differs from the CPU's (no heap, no logit threshold, no mass floor; every candidate
// sorted), so equality here is what makes device sampling lossless: the same tokens with the
// same probability bits, hence the same draw for every Philox uniform.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "kernels/common/process_math.h"
#include "kernels/common/row_math.h"
#include "runtime/sampling/philox.h"
#include "runtime/sampling/sampler.h"
#include "runtime/sampling/vocab_scan.h"
#include "tests/unit/device_math/block_scan_emulation.h"

namespace ssd {
namespace {

namespace hd = kernels::hd;

// What kernels/cuda/device_sampler.cu does, step for step, with std::sort for the device sort
// and the block's sums and searches emulated (block_scan_emulation.h).
ProcessedDist process_as_device(const std::vector<float>& l, const SamplerConfig& cfg) {
  const int64_t n = static_cast<int64_t>(l.size());
  float l_max = -INFINITY;
  int64_t n_valid = 0;
  for (const float x : l) {  // step 1
    if (x > l_max) l_max = x;
    n_valid += hd::valid_logit(x) ? 1 : 0;
  }
  const double t = cfg.temperature, top_p = cfg.top_p, min_p = cfg.min_p;
  const bool top_k_path = hd::use_top_k_path(cfg.top_k, n_valid);
  std::vector<double> e(static_cast<size_t>(n));
  std::vector<uint64_t> keys(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {  // step 2
    e[i] = hd::relative_exp_one(l[i], l_max, t);
    keys[i] = hd::candidate_key(l[i], static_cast<int32_t>(i), e[i], top_k_path, min_p);
  }
  std::sort(keys.begin(), keys.end());  // step 3
  const int64_t n_cand =
      top_k_path ? cfg.top_k : std::find(keys.begin(), keys.end(), hd::kNoKey) - keys.begin();
  auto e_of = [&](int64_t i) { return e[hd::order_key_id(keys[i])]; };
  auto e_by_id = [&](int64_t i) { return e[i]; };
  // Steps 4-6 as the select kernel's block of kRowThreads shares them (block_scan.cuh).
  constexpr int kThreads = hd::kRowThreads;
  const std::vector<double> pre = testing::block_chunk_prefix(n_cand, e_of, kThreads);
  const double z = top_k_path
                       ? hd::blocked_sum(pre.data(), n_cand, e_of)
                       : hd::blocked_sum(testing::block_chunk_prefix(n, e_by_id, kThreads).data(),
                                         n, e_by_id);  // step 4
  int64_t keep = top_p < 1 ? testing::block_top_p_count(pre.data(), n_cand, e_of,
                                                         hd::dmul_rn(top_p, z), kThreads)
                           : n_cand;  // step 5
  if (top_k_path && min_p > 0) {  // the block's smallest index below min_p
    int64_t below = keep;
    for (int64_t i = 0; i < keep; ++i)
      if (!(e_of(i) >= min_p)) below = std::min(below, i);
    keep = below;
  }
  if (keep > 1) {  // the block's largest index with e != 0
    int64_t last = 0;
    for (int64_t i = 0; i < keep; ++i)
      if (e_of(i) != 0) last = i;
    keep = last + 1;
  }
  EXPECT_EQ(keep, hd::kept_count(pre.data(), n_cand, e_of, top_p, z, min_p,
                                 top_k_path && min_p > 0));
  const double sum = hd::blocked_sum(pre.data(), keep, e_of);  // step 6
  ProcessedDist d;
  for (int64_t i = 0; i < keep; ++i) d.tokens.push_back({hd::order_key_id(keys[i]), e_of(i) / sum});
  return d;
}

// Logits of one of several shapes: smooth, peaked, with ties (quantised), with NaN and -inf.
std::vector<float> logits_of(int kind, int32_t n, std::mt19937& rng) {
  std::normal_distribution<float> g(0.0f, kind == 1 ? 8.0f : 2.5f);
  std::vector<float> l(static_cast<size_t>(n));
  for (auto& x : l) x = g(rng);
  if (kind == 2)
    for (auto& x : l) x = std::round(x * 4.0f) / 4.0f;  // many exact ties
  if (kind == 3) {
    std::uniform_int_distribution<int32_t> pick(0, n - 1);
    for (int i = 0; i < std::max(1, n / 50); ++i) l[pick(rng)] = -INFINITY;
    for (int i = 0; i < std::max(1, n / 80); ++i) l[pick(rng)] = NAN;
  }
  return l;
}

void expect_same(const ProcessedDist& got, const ProcessedDist& want, const std::string& where) {
  ASSERT_EQ(got.size(), want.size()) << where;
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(got.tokens[i].id, want.tokens[i].id) << where << " entry " << i;
    ASSERT_EQ(hd::f64_bits(got.tokens[i].prob), hd::f64_bits(want.tokens[i].prob))
        << where << " entry " << i;
  }
}

TEST(ProcessTwin, DevicePlanBuildsTheSamplersListBitForBit) {
  std::mt19937 rng(11);
  int cases = 0;
  for (const int32_t vocab : {1, 3, 7, 1000, 49152}) {
    for (int kind = 0; kind < 4; ++kind) {
      const std::vector<float> l = logits_of(kind, vocab, rng);
      if (std::none_of(l.begin(), l.end(), [](float x) { return hd::valid_logit(x); })) continue;
      for (const float temp : {0.05f, 0.7f, 1.0f, 3.0f}) {
        for (const int32_t top_k : {0, 1, 5, 40, vocab + 3}) {
          for (const float top_p : {1.0f, 0.95f, 0.5f, 0.1f}) {
            for (const float min_p : {0.0f, 0.05f, 0.3f}) {
              const SamplerConfig cfg{temp, top_k, top_p, min_p, 5};
              const std::string where =
                  "vocab " + std::to_string(vocab) + " kind " + std::to_string(kind) + " t " +
                  std::to_string(temp) + " k " + std::to_string(top_k) + " p " +
                  std::to_string(top_p) + " min_p " + std::to_string(min_p);
              expect_same(process_as_device(l, cfg), process(l.data(), vocab, cfg), where);
              if (HasFatalFailure()) return;
              ++cases;
            }
          }
        }
      }
    }
  }
  EXPECT_GT(cases, 1000);
}

// The draw: the block's inverse CDF over the list (blocked order) gives ssd::sample's token for
// the same Philox uniform, so the device's token equals Sampler::sample's.
TEST(ProcessTwin, DeviceDrawEqualsTheSamplersDraw) {
  std::mt19937 rng(12);
  const int32_t vocab = 49152;
  for (int kind = 0; kind < 3; ++kind) {
    const std::vector<float> l = logits_of(kind, vocab, rng);
    for (const SamplerConfig cfg : {SamplerConfig{0.8f, 0, 0.9f, 0.0f, 3},
                                    SamplerConfig{1.0f, 40, 1.0f, 0.05f, 4},
                                    SamplerConfig{0.6f, 0, 1.0f, 0.0f, 9}}) {
      const ProcessedDist d = process_as_device(l, cfg);
      auto p = [&](int64_t i) { return d.tokens[i].prob; };
      const int64_t n = static_cast<int64_t>(d.size());
      const std::vector<double> pre = testing::block_chunk_prefix(n, p, hd::kRowThreads);
      const Sampler s(cfg);
      for (uint32_t step = 0; step < 300; ++step) {
        const double u = hd::philox_uniform(cfg.seed, 17, step, kLaneToken);
        const int64_t i = testing::block_inverse_cdf(pre.data(), n, p, u, hd::kRowThreads);
        ASSERT_EQ(d.tokens[i].id, s.sample(l.data(), vocab, 17, step))
            << "kind " << kind << " step " << step;
      }
    }
  }
}

}  // namespace
}  // namespace ssd
