// The blocked order of kernels/common/blocked_scan.h, which the device sampler's thread blocks and
// the CPU sampler both sum in: the serial functions against a reference written here from the
// documented order alone; the block's way of sharing the work (block_scan_emulation.h, the
// kernels' steps on the CPU) against the serial functions; prefix stability; the rounding
// against an exact sum (written bound); and the CPU sampler's lists and draws against the
// reference. Tolerance: none, except the stated rounding bound.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kernels/common/blocked_scan.h"
#include "runtime/sampling/sampler.h"
#include "runtime/sampling/vocab_scan.h"
#include "tests/unit/device_math/block_scan_emulation.h"

namespace ssd {
namespace {

namespace hd = kernels::hd;

// The running sums of w in the documented order, written without blocked_scan.h: chunk totals
// of 64 left to right, a Kogge-Stone scan with a fresh vector per level, each entry's running
// sum added left to right onto its chunk's exclusive prefix.
std::vector<double> reference_running(const std::vector<double>& w) {
  const size_t n = w.size(), chunk = 64, m = (n + chunk - 1) / chunk;
  std::vector<double> x(m, 0.0);
  for (size_t i = 0; i < n; ++i) x[i / chunk] += w[i];
  for (size_t off = 1; off < m; off *= 2) {
    std::vector<double> next = x;
    for (size_t c = off; c < m; ++c) next[c] = x[c - off] + x[c];
    x = next;
  }
  std::vector<double> run(n);
  for (size_t c = 0; c < m; ++c) {
    double r = c > 0 ? x[c - 1] : 0.0;
    for (size_t i = c * chunk; i < std::min(n, (c + 1) * chunk); ++i) run[i] = r += w[i];
  }
  return run;
}

// Weights as the sampler sees them: a few large, a long tail over many binades, some zeros.
std::vector<double> weights(int64_t n, std::mt19937& rng) {
  std::uniform_real_distribution<double> exponent(-40.0, 0.0);
  std::vector<double> w(static_cast<size_t>(n));
  for (auto& v : w) v = std::exp(exponent(rng));
  for (int64_t i = 0; i < n; i += 17) w[static_cast<size_t>(i)] = 0.0;
  return w;
}

uint64_t bits(double d) { return hd::f64_bits(d); }

const int64_t kSizes[] = {1, 2, 63, 64, 65, 127, 128, 129, 1000, 4096, 4097, 49152, 50257, 151936};

TEST(BlockedScan, SerialFunctionsFollowTheDocumentedOrder) {
  std::mt19937 rng(31);
  for (const int64_t n : kSizes) {
    const std::vector<double> w = weights(n, rng);
    auto wf = [&](int64_t i) { return w[i]; };
    const std::vector<double> want = reference_running(w);
    std::vector<double> pre(static_cast<size_t>(hd::scan_chunks(n)));
    hd::chunk_prefix(n, wf, pre.data());
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(bits(hd::running_sum(pre.data(), i, wf)), bits(want[i])) << "n " << n << " i " << i;
    EXPECT_EQ(hd::blocked_sum(pre.data(), 0, wf), 0.0);
    EXPECT_EQ(bits(hd::blocked_sum(pre.data(), n, wf)), bits(want.back())) << "n " << n;
    std::vector<double> scratch(pre.size());
    EXPECT_EQ(bits(sampling_detail::blocked_total(w.data(), static_cast<int32_t>(n),
                                                  scratch.data())),
              bits(want.back()))
        << "n " << n;
  }
}

// The block shares the work (thread t: chunks t, t + T, ...; the tree level by level) and
// gets the serial bits and the serial search results, for several block sizes.
TEST(BlockedScan, BlockEmulationEqualsTheSerialFunctions) {
  std::mt19937 rng(32);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (const int64_t n : kSizes) {
    const std::vector<double> w = weights(n, rng);
    auto wf = [&](int64_t i) { return w[i]; };
    std::vector<double> pre(static_cast<size_t>(hd::scan_chunks(n)));
    hd::chunk_prefix(n, wf, pre.data());
    const double total = hd::blocked_sum(pre.data(), n, wf);
    for (const int threads : {256, 32, 1}) {
      const std::string where = "n " + std::to_string(n) + " threads " + std::to_string(threads);
      const std::vector<double> got = testing::block_chunk_prefix(n, wf, threads);
      ASSERT_EQ(got.size(), pre.size()) << where;
      for (size_t c = 0; c < pre.size(); ++c) ASSERT_EQ(bits(got[c]), bits(pre[c])) << where;
      // Targets at random, just past a running sum (the cut's edge), and past the total.
      std::vector<double> targets = {0.0, total, 2 * total};
      for (int k = 0; k < 50; ++k) targets.push_back(unit(rng) * total);
      for (int k = 0; k < 20; ++k)
        targets.push_back(hd::running_sum(pre.data(), static_cast<int64_t>(unit(rng) * n), wf));
      for (const double target : targets)
        ASSERT_EQ(testing::block_top_p_count(pre.data(), n, wf, target, threads),
                  hd::blocked_top_p_count(pre.data(), n, wf, target))
            << where << " target " << target;
      for (const double u : {0.0, 0.5, std::nextafter(1.0, 0.0), unit(rng), unit(rng)})
        ASSERT_EQ(testing::block_inverse_cdf(pre.data(), n, wf, u, threads),
                  hd::blocked_inverse_cdf(pre.data(), n, wf, u))
            << where << " u " << u;
    }
  }
}

// The running sum at i depends on w[0..i] only: a list cut short (the CPU's floor) gives the
// whole list's running sums, hence the same top-p cut and the same sum of a kept prefix.
TEST(BlockedScan, RunningSumsArePrefixStable) {
  std::mt19937 rng(33);
  const int64_t n = 50257;
  const std::vector<double> w = weights(n, rng);
  std::vector<double> full(static_cast<size_t>(hd::scan_chunks(n)));
  hd::chunk_prefix(n, [&](int64_t i) { return w[i]; }, full.data());
  for (const int64_t k : {1, 63, 64, 65, 1000, 4097, 30001}) {
    std::vector<double> cut(static_cast<size_t>(hd::scan_chunks(k)));
    hd::chunk_prefix(k, [&](int64_t i) { return w[i]; }, cut.data());
    for (int64_t i = 0; i < k; ++i)
      ASSERT_EQ(bits(hd::running_sum(cut.data(), i, [&](int64_t j) { return w[j]; })),
                bits(hd::running_sum(full.data(), i, [&](int64_t j) { return w[j]; })))
          << "k " << k << " i " << i;
  }
}

// Rounding: each running sum is within (2 * 64 + ceil(log2 m) + 2) * 2^-53 of the exact sum of
// the (non-negative) weights it covers (two chunk folds of at most 64 additions and one tree
// path of log2 m, each adding at most one rounding of the partial sum).
TEST(BlockedScan, SumIsWithinTheWrittenBoundOfTheExactSum) {
  std::mt19937 rng(34);
  for (const int64_t n : kSizes) {
    const std::vector<double> w = weights(n, rng);
    std::vector<double> pre(static_cast<size_t>(hd::scan_chunks(n)));
    hd::chunk_prefix(n, [&](int64_t i) { return w[i]; }, pre.data());
    long double exact = 0;
    for (const double v : w) exact += v;
    const double got = hd::blocked_sum(pre.data(), n, [&](int64_t i) { return w[i]; });
    const double levels = std::ceil(std::log2(static_cast<double>(pre.size()) + 1));
    const long double bound = (2 * 64 + levels + 2) * std::ldexp(1.0, -53) * exact;
    EXPECT_LE(std::fabs(static_cast<long double>(got) - exact), bound) << "n " << n;
  }
}

std::vector<float> logits(int32_t n, std::mt19937& rng) {
  std::normal_distribution<float> g(0.0f, 2.5f);
  std::vector<float> l(static_cast<size_t>(n));
  for (auto& x : l) x = g(rng);
  return l;
}

// The CPU sampler's list: a temperature-only list is e / (blocked sum of e in list order), with
// Z the blocked sum over token ids; a top-p list ends where the reference running sum first
// reaches top_p * Z; sample() draws the first entry whose reference running sum exceeds
// u * (blocked total).
TEST(BlockedScan, CpuSamplerSumsAndDrawsInTheDocumentedOrder) {
  std::mt19937 rng(35);
  const int32_t vocab = 49152;
  const std::vector<float> l = logits(vocab, rng);
  const float l_max = sampling_detail::max_logit(l.data(), vocab);
  for (const SamplerConfig cfg : {SamplerConfig{0.8f, 0, 1.0f, 0.0f, 3},
                                  SamplerConfig{1.3f, 0, 0.9f, 0.0f, 4},
                                  SamplerConfig{0.7f, 0, 0.5f, 0.0f, 5}}) {
    const ProcessedDist d = process(l.data(), vocab, cfg);
    std::vector<double> e_by_id(vocab);
    for (int32_t i = 0; i < vocab; ++i)
      e_by_id[i] = sampling_detail::relative_exp_one(l[i], l_max, cfg.temperature);
    const double z = reference_running(e_by_id).back();
    // The list order is the sampler's (tested elsewhere); the weights are its e in that order.
    std::vector<uint64_t> keys;
    for (int32_t i = 0; i < vocab; ++i)
      if (e_by_id[i] > 0) keys.push_back(sampling_detail::order_key(l[i], i));
    std::sort(keys.begin(), keys.end());
    std::vector<double> e_list;
    for (const uint64_t k : keys) e_list.push_back(e_by_id[sampling_detail::key_id(k)]);
    const std::vector<double> run = reference_running(e_list);
    size_t keep = run.size();
    if (cfg.top_p < 1) {
      const double target = static_cast<double>(cfg.top_p) * z;
      keep = static_cast<size_t>(std::find_if(run.begin(), run.end(),
                                              [&](double r) { return r >= target; }) -
                                 run.begin()) + 1;
    }
    ASSERT_EQ(d.size(), keep) << "top_p " << cfg.top_p;
    const double sum = run[keep - 1];
    for (size_t i = 0; i < keep; ++i) {
      ASSERT_EQ(d.tokens[i].id, sampling_detail::key_id(keys[i]));
      ASSERT_EQ(bits(d.tokens[i].prob), bits(e_list[i] / sum)) << "entry " << i;
    }
    std::vector<double> p;
    for (const TokenProb& t : d.tokens) p.push_back(t.prob);
    const std::vector<double> prun = reference_running(p);
    for (uint32_t step = 0; step < 200; ++step) {
      const double u = philox_uniform(cfg.seed, 1, step, kLaneToken);
      const double target = u * prun.back();
      const size_t i = static_cast<size_t>(
          std::find_if(prun.begin(), prun.end(), [&](double r) { return target < r; }) -
          prun.begin());
      ASSERT_EQ(sample(d, u), d.tokens[std::min(i, d.size() - 1)].id) << "step " << step;
    }
  }
}

}  // namespace
}  // namespace ssd
