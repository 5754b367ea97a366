// The activation quantizer of the integer matmul (act_q8.h), per block of 32 values:
//   q = round-half-even(x * (127 / amax)) exactly, with both operations in float32 (the
//   definition, checked against std::nearbyint);
//   |x - d q| <= d / 2 + 3e-7 |x|  (half a step, plus the float32 rounding of x * (127 / amax)
//                                   and of d = amax / 127, each 2^-24 relative, with margin);
//   the largest |x| gets |q| = 127, every q is in [-127, 127];
//   qsum holds the exact sums of the codes of values 0..15 and 16..31, and sum = d * their total
//   (one float32 product: exact equality);
//   zero blocks give d = 0 and zero codes; non-finite input gives a NaN d and sum.
#include "kernels/cpu/act_q8.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "kernel_test_util.h"
#include "runtime/core/error.h"

namespace ssd::kernels {
namespace {

TEST(ActQ8, CodesWithinHalfAStepAndSumsExact) {
  std::mt19937 rng(1);
  std::vector<std::vector<float>> cases = {test::random_floats(32 * 40, rng),
                                           test::random_floats(32 * 4, rng, 1e-30f),
                                           test::random_floats(32 * 4, rng, 1e30f)};
  std::vector<float> spikes(32 * 4, 0.0f);
  spikes[3] = -2.5f;
  spikes[32 + 31] = 1e-3f;
  spikes[64 + 16] = 7.0f, spikes[64 + 17] = -7.0f;
  // amax 2, so x * (127 / amax) = (i - 16) * 7.9375 exactly: i - 16 = +-8 are ties (+-63.5)
  for (int i = 0; i < 32; ++i) spikes[96 + i] = static_cast<float>(i - 16) * 0.125f;
  cases.push_back(spikes);
  for (const auto& x : cases) {
    const int64_t n = static_cast<int64_t>(x.size()) / 64, cols = 64;  // 2 blocks per token
    ActQ8Buffer buf;
    const ActQ8& a = buf.quantize(x.data(), n, cols);
    ASSERT_EQ(a.blocks, 2);
    for (int64_t t = 0; t < n; ++t)
      for (int64_t b = 0; b < 2; ++b) {
        const float* xb = x.data() + t * cols + 32 * b;
        const int8_t* q = a.codes(t, b);
        const int64_t k = a.at(t, b);
        double amax = 0;
        int32_t s0 = 0, s1 = 0;
        int max_code = 0;
        for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(static_cast<double>(xb[i])));
        const float inv = amax > 0 ? 127.0f / static_cast<float>(amax) : 0.0f;
        for (int i = 0; i < 32; ++i) {
          ASSERT_EQ(q[i], static_cast<int>(std::nearbyint(xb[i] * inv))) << i;
          (i < 16 ? s0 : s1) += q[i];
          max_code = std::max(max_code, std::abs(static_cast<int>(q[i])));
          ASSERT_GE(q[i], -127);
          ASSERT_LE(std::fabs(xb[i] - static_cast<double>(a.d[k]) * q[i]),
                    a.d[k] / 2.0 + 3e-7 * std::fabs(xb[i]))
              << "token " << t << " block " << b << " value " << i;
        }
        EXPECT_EQ(max_code, amax > 0 ? 127 : 0);
        EXPECT_EQ(a.qsum[2 * k], s0);
        EXPECT_EQ(a.qsum[2 * k + 1], s1);
        EXPECT_EQ(a.sum[k], a.d[k] * static_cast<float>(s0 + s1));
        EXPECT_NEAR(a.d[k], amax / 127, amax / 127 * 1e-6);
      }
  }
}

TEST(ActQ8, SameTokenSameCodesWhateverTheBatch) {
  std::mt19937 rng(2);
  const auto probe = test::random_floats(96, rng);
  ActQ8Buffer one, many;
  const ActQ8& a = one.quantize(probe.data(), 1, 96);
  std::vector<int8_t> codes;
  std::vector<float> d;
  for (int b = 0; b < 3; ++b) {
    codes.insert(codes.end(), a.codes(0, b), a.codes(0, b) + 32);
    d.push_back(a.d[a.at(0, b)]);
  }
  auto x = test::random_floats(5 * 96, rng, 10.0f);
  std::copy(probe.begin(), probe.end(), x.begin() + 3 * 96);
  const ActQ8& b = many.quantize(x.data(), 5, 96);
  for (int i = 0; i < 96; ++i) EXPECT_EQ(b.codes(3, i / 32)[i % 32], codes[i]) << i;
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(test::same_float(b.d[b.at(3, i)], d[i]));
}

TEST(ActQ8, NonFiniteInputGivesNaNScale) {
  std::vector<float> x(64, 1.0f);
  x[3] = std::numeric_limits<float>::infinity();
  x[40] = std::nanf("");
  ActQ8Buffer buf;
  const ActQ8& a = buf.quantize(x.data(), 1, 64);
  EXPECT_TRUE(std::isnan(a.d[0]) && std::isnan(a.sum[0]));
  EXPECT_TRUE(std::isnan(a.d[1]) && std::isnan(a.sum[1]));
  const std::vector<float> zeros(32, 0.0f);
  const ActQ8& z = buf.quantize(zeros.data(), 1, 32);
  EXPECT_EQ(z.d[0], 0.0f);
  EXPECT_EQ(z.sum[0], 0.0f);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(z.q[i], 0);
}

TEST(ActQ8, RejectsPartialBlocks) {
  std::vector<float> x(48);
  ActQ8Buffer buf;
  EXPECT_THROW(buf.quantize(x.data(), 1, 48), Error);
}

}  // namespace
}  // namespace ssd::kernels
