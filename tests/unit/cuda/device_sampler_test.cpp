// DeviceSampler (runtime/backend/cuda/device_sampler.h) against the CPU sampler: the processed list
// must be ssd::process()'s exactly (ids, and probabilities bit for bit) and the drawn token
// Sampler::sample's, for greedy and every filter, on awkward vocabularies (1, 7, 1001, 49152), with
// ties, NaN and -inf, from host and from device logits; invalid rows give the CPU's errors.
// Tolerance: none (the plan's CPU twin, tests/unit/device_math/process_twin_test.cpp, shows the
// arithmetic is the same). Needs a GPU: skips with a visible message without one.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "runtime/backend/cuda/cuda_backend.h"
#include "runtime/backend/cuda/device_sampler.h"
#include "runtime/core/error.h"
#include "runtime/sampling/sampler.h"
#include "tests/unit/cuda/skip_without_gpu.h"

namespace ssd {
namespace {


std::vector<float> logits_of(int kind, int32_t n, std::mt19937& rng) {
  std::normal_distribution<float> g(0.0f, kind == 1 ? 8.0f : 2.5f);
  std::vector<float> l(static_cast<size_t>(n));
  for (auto& x : l) x = g(rng);
  if (kind == 2)
    for (auto& x : l) x = std::round(x * 4.0f) / 4.0f;
  if (kind == 3 && n > 2) {
    l[1] = -INFINITY;
    l[n - 1] = NAN;
  }
  return l;
}

uint64_t bits(double d) {
  uint64_t u;
  std::memcpy(&u, &d, sizeof u);
  return u;
}

TEST(DeviceSampler, ListAndDrawEqualTheCpuSampler) {
  SSD_SKIP_WITHOUT_GPU("device sampling vs the CPU sampler");
  DeviceSampler ds(0);
  std::mt19937 rng(21);
  for (const int32_t vocab : {1, 7, 1001, 49152}) {
    for (int kind = 0; kind < 4; ++kind) {
      const std::vector<float> l = logits_of(kind, vocab, rng);
      for (const SamplerConfig cfg :
           {SamplerConfig{0.0f, 0, 1.0f, 0.0f, 1}, SamplerConfig{0.7f, 0, 1.0f, 0.0f, 2},
            SamplerConfig{1.0f, 40, 1.0f, 0.0f, 3}, SamplerConfig{0.8f, 0, 0.9f, 0.0f, 4},
            SamplerConfig{1.2f, 0, 1.0f, 0.05f, 5}, SamplerConfig{0.6f, 50, 0.95f, 0.02f, 6},
            SamplerConfig{2.0f, vocab + 3, 0.5f, 0.0f, 7}}) {
        const std::string where = "vocab " + std::to_string(vocab) + " kind " +
                                  std::to_string(kind) + " t " + std::to_string(cfg.temperature);
        const ProcessedDist want = process(l.data(), vocab, cfg);
        const ProcessedDist got = ds.process(l.data(), vocab, cfg);
        ASSERT_EQ(got.size(), want.size()) << where;
        for (size_t i = 0; i < want.size(); ++i) {
          ASSERT_EQ(got.tokens[i].id, want.tokens[i].id) << where << " entry " << i;
          ASSERT_EQ(bits(got.tokens[i].prob), bits(want.tokens[i].prob)) << where;
        }
        const Sampler cpu(cfg);
        for (uint32_t step = 0; step < 20; ++step)
          ASSERT_EQ(ds.sample(l.data(), vocab, cfg, 9, step), cpu.sample(l.data(), vocab, 9, step))
              << where << " step " << step;
      }
    }
  }
}

TEST(DeviceSampler, ReadsDeviceLogitsInPlace) {
  SSD_SKIP_WITHOUT_GPU("device sampling vs the CPU sampler");
  std::mt19937 rng(22);
  const int32_t vocab = 49152;
  const std::vector<float> l = logits_of(0, vocab, rng);
  float* dl = nullptr;
  ASSERT_EQ(cudaMalloc(&dl, l.size() * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dl, l.data(), l.size() * sizeof(float), cudaMemcpyHostToDevice),
            cudaSuccess);
  DeviceSampler ds(0);
  const SamplerConfig cfg{0.9f, 0, 0.95f, 0.0f, 8};
  const Sampler cpu(cfg);
  for (uint32_t step = 0; step < 50; ++step)
    EXPECT_EQ(ds.sample(dl, vocab, cfg, 3, step), cpu.sample(l.data(), vocab, 3, step));
  cudaFree(dl);
}

TEST(DeviceSampler, InvalidRowsGiveTheCpuSamplersErrors) {
  SSD_SKIP_WITHOUT_GPU("device sampling vs the CPU sampler");
  DeviceSampler ds(0);
  const SamplerConfig cfg{0.8f, 0, 1.0f, 0.0f, 1};
  auto message = [&](const std::vector<float>& l, const SamplerConfig& c) {
    try {
      ds.process(l.data(), static_cast<int32_t>(l.size()), c);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  auto cpu_message = [&](const std::vector<float>& l, const SamplerConfig& c) {
    try {
      process(l.data(), static_cast<int32_t>(l.size()), c);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::vector<float> with_inf = {0.0f, INFINITY, 1.0f, INFINITY};
  const std::vector<float> all_invalid = {-INFINITY, NAN, -INFINITY};
  const std::vector<float> all_nan = {NAN, NAN};
  EXPECT_EQ(message(with_inf, cfg), cpu_message(with_inf, cfg));
  EXPECT_EQ(message(all_invalid, cfg), cpu_message(all_invalid, cfg));
  const SamplerConfig greedy{};
  EXPECT_EQ(message(all_nan, greedy), cpu_message(all_nan, greedy));
}

}  // namespace
}  // namespace ssd
