// The whole-vocabulary helpers behind process(): the exp polynomial against libm, the order keys
// against the (logit desc, id asc) comparison, the radix sort against std::sort, and the top-k
// heap against a full sort. Sizes are odd on purpose (tails of the 8- and 4-wide loops).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "runtime/sampling/philox.h"
#include "runtime/sampling/vocab_scan.h"

namespace ssd::sampling_detail {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Logits with many exact ties (values on a 1/8 grid) and some special values.
std::vector<float> tied_logits(int32_t n, uint64_t stream) {
  std::vector<float> l(n);
  for (int32_t i = 0; i < n; ++i)
    l[i] = std::round(static_cast<float>(philox_uniform(3, stream, i) * 80 - 40)) / 8;
  return l;
}

bool before(const std::vector<float>& l, int32_t a, int32_t b) {
  return l[a] > l[b] || (l[a] == l[b] && a < b);
}

TEST(VocabScan, RelativeExpMatchesLibm) {
  // Exponents spread over [-708, 0]: each e within 4e-16 relative of std::exp of the same
  // double exponent (the polynomial measured 2.2e-16), invalid / too small ones exactly 0.
  constexpr int32_t kN = 10007;
  std::vector<float> l(kN);
  for (int32_t i = 0; i < kN; ++i) l[i] = -static_cast<float>(philox_uniform(4, 0, i) * 700.0);
  l[5] = 0;
  l[17] = -kInf;
  l[18] = kNaN;
  l[19] = -720;  // exponent below kMinExponent at t = 1
  std::vector<double> e(kN), x(kN);
  const double t = 1.0;
  const double z = relative_exp(l.data(), kN, 0.0f, t, e.data(), x.data());
  double sum = 0;
  for (int32_t i = 0; i < kN; ++i) {
    const double xi = static_cast<double>(l[i]) / t;
    const double want = (std::isnan(xi) || xi < kMinExponent) ? 0.0 : std::exp(xi);
    if (want == 0) {
      EXPECT_EQ(e[i], 0.0) << i;
    } else {
      EXPECT_NEAR(e[i], want, 4e-16 * want) << "x " << xi;
    }
    EXPECT_EQ(relative_exp_one(l[i], 0.0f, t), e[i]) << i;  // same definition, one token
    sum += e[i];
  }
  EXPECT_EQ(e[5], 1.0);
  EXPECT_NEAR(z, sum, 1e-15 * sum);
}

TEST(VocabScan, MaxLogitIgnoresNaN) {
  std::vector<float> l = tied_logits(1001, 1);
  l[1000] = 99;  // in the scalar tail
  l[3] = kNaN;
  EXPECT_EQ(max_logit(l.data(), 1001), 99.0f);
  EXPECT_EQ(max_logit(l.data(), 1000), *std::max_element(l.begin() + 4, l.begin() + 1000));
  const std::vector<float> bad = {kNaN, -kInf, kNaN};
  EXPECT_EQ(max_logit(bad.data(), 3), -kInf);
}

TEST(VocabScan, OrderKeysSortLikeLogitDescThenId) {
  std::vector<float> l = tied_logits(3001, 2);
  l[7] = -0.0f;  // equal to +0 as a float
  l[8] = 0.0f;
  l[9] = -1e-40f;  // subnormal
  l[10] = std::numeric_limits<float>::max();
  l[11] = std::numeric_limits<float>::lowest();
  std::vector<int32_t> want(l.size());
  for (size_t i = 0; i < l.size(); ++i) want[i] = static_cast<int32_t>(i);
  std::sort(want.begin(), want.end(), [&](int32_t a, int32_t b) { return before(l, a, b); });
  std::vector<uint64_t> keys, tmp;
  for (size_t i = 0; i < l.size(); ++i) keys.push_back(order_key(l[i], static_cast<int32_t>(i)));
  sort_gathered_keys(keys, tmp);  // radix path (> 1024 keys)
  std::vector<uint64_t> by_std = keys;
  std::sort(by_std.begin(), by_std.end());
  EXPECT_EQ(keys, by_std);
  for (size_t i = 0; i < keys.size(); ++i) ASSERT_EQ(key_id(keys[i]), want[i]) << i;
}

TEST(VocabScan, TopKHeapKeepsTheKBest) {
  std::vector<float> l = tied_logits(4099, 3);
  l[0] = kNaN;
  l[1] = -kInf;
  for (int32_t k : {1, 7, 40, 1000}) {
    std::vector<uint64_t> keys;
    ASSERT_TRUE(top_k_keys(l.data(), 4099, k, keys));
    std::sort(keys.begin(), keys.end());
    std::vector<int32_t> want;
    for (int32_t i = 2; i < 4099; ++i) want.push_back(i);
    std::sort(want.begin(), want.end(), [&](int32_t a, int32_t b) { return before(l, a, b); });
    ASSERT_EQ(keys.size(), static_cast<size_t>(k));
    for (int32_t i = 0; i < k; ++i) ASSERT_EQ(key_id(keys[i]), want[i]) << "k " << k;
  }
  // Fewer valid logits than k: top-k keeps everything, reported as false.
  const std::vector<float> few = {1, kNaN, 2, -kInf};
  std::vector<uint64_t> keys;
  EXPECT_FALSE(top_k_keys(few.data(), 4, 3, keys));
  EXPECT_TRUE(top_k_keys(few.data(), 4, 2, keys));
}

TEST(VocabScan, MassFloorBoundsTheTopPCut) {
  // Binade b holds e in [2^-b, 2^(1-b)): 1.0 | 0.6 | 0.3 | 0.2 | (none) | 0.05.
  const std::vector<double> e = {0.3, 1.0, 0.05, 0.6, 0.2};
  EXPECT_EQ(mass_floor(e.data(), 5, 0.9), 1.0);     // the top token alone
  EXPECT_EQ(mass_floor(e.data(), 5, 1.5), 0.5);     // 1 + 0.6
  EXPECT_EQ(mass_floor(e.data(), 5, 1.7), 0.25);    // + 0.3
  EXPECT_EQ(mass_floor(e.data(), 5, 2.05), 0.125);  // + 0.2
  EXPECT_EQ(mass_floor(e.data(), 5, 2.12), 1.0 / 32);
  EXPECT_EQ(mass_floor(e.data(), 5, 3.0), 0.0);     // never reached
}

}  // namespace
}  // namespace ssd::sampling_detail
