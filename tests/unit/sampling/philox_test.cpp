// Philox4x32-10 against the published known-answer vectors, and the (seed, stream, step, lane)
// addressing built on it.
//
// The expected values are the three "philox4x32 10" lines of Random123's kat_vectors file
// (counter[4] key[2] -> output[4]), looked up in public copies of that file. As an independent
// cross-check they were also reproduced by a separate 10-line Python implementation with
// arbitrary-precision integers (not derived from this C++ code) before this test was written.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "runtime/sampling/philox.h"

namespace ssd {
namespace {

struct Kat {
  PhiloxCounter ctr;
  PhiloxKey key;
  PhiloxCounter want;
};

constexpr Kat kKats[] = {
    {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
    {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
     {0xffffffff, 0xffffffff},
     {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
    {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
     {0xa4093822, 0x299f31d0},
     {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
};

// The block function is constexpr: the KATs also hold at compile time.
static_assert(philox4x32_10(kKats[2].ctr, kKats[2].key) == kKats[2].want);

TEST(Philox, KnownAnswerVectors) {
  for (const Kat& k : kKats) EXPECT_EQ(philox4x32_10(k.ctr, k.key), k.want);
}

TEST(Philox, UnitDoubleEndpoints) {
  EXPECT_EQ(u53_to_unit_double(0, 0), 0.0);
  EXPECT_EQ(u53_to_unit_double(0xffffffff, 0xffffffff), 1.0 - 0x1.0p-53);
  // The low 11 bits of the pair are discarded, so only the top 53 matter.
  EXPECT_EQ(u53_to_unit_double(0, 0x7ff), 0.0);
  EXPECT_EQ(u53_to_unit_double(0, 0x800), 0x1.0p-53);
}

TEST(Philox, AddressMapsToCounterAndKey) {
  // (seed, stream, step, lane) -> key = seed, counter = {lane/2, step, stream lo, stream hi}.
  const uint64_t seed = 0x299f31d0a4093822ull;
  const uint64_t stream = 0x0370734413198a2eull;
  const uint32_t step = 0x85a308d3;
  const uint32_t lane = 2 * 0x243f6a88u;
  EXPECT_EQ(philox_block(seed, stream, step, lane), kKats[2].want);
  EXPECT_EQ(philox_uniform(seed, stream, step, lane),
            u53_to_unit_double(kKats[2].want[0], kKats[2].want[1]));
  EXPECT_EQ(philox_uniform(seed, stream, step, lane + 1),
            u53_to_unit_double(kKats[2].want[2], kKats[2].want[3]));
}

TEST(Philox, EveryAddressComponentChangesTheDraw) {
  const double base = philox_uniform(1, 2, 3, 0);
  EXPECT_EQ(philox_uniform(1, 2, 3, 0), base);  // pure function
  EXPECT_NE(philox_uniform(1ull | 1ull << 40, 2, 3, 0), base);  // seed high word
  EXPECT_NE(philox_uniform(1, 2ull | 1ull << 40, 3, 0), base);  // stream high word
  EXPECT_NE(philox_uniform(1, 2, 4, 0), base);
  EXPECT_NE(philox_uniform(1, 2, 3, 1), base);
  EXPECT_NE(philox_uniform(1, 2, 3, 2), base);
}

TEST(Philox, UniformMomentsAndRange) {
  // 100k draws: mean 1/2 and variance 1/12 within 5 standard errors (se(mean) = 9.1e-4,
  // se(var) ~ sqrt(1/180/n) = 2.4e-4), all in [0, 1), and no repeated value (53-bit draws).
  constexpr int kN = 100000;
  double sum = 0, sum2 = 0;
  std::set<double> seen;
  for (int i = 0; i < kN; ++i) {
    const double u = philox_uniform(12345, 7, static_cast<uint32_t>(i));
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
    sum2 += u * u;
    seen.insert(u);
  }
  const double mean = sum / kN;
  const double var = sum2 / kN - mean * mean;
  EXPECT_NEAR(mean, 0.5, 5 * 9.1e-4);
  EXPECT_NEAR(var, 1.0 / 12, 5 * 2.4e-4);
  EXPECT_EQ(seen.size(), static_cast<size_t>(kN));
}

}  // namespace
}  // namespace ssd
