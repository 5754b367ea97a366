// F16 / BF16 conversions: exact decoding of known bit patterns (zero signs, subnormals, the
// extremes, inf, NaN), exhaustive round trips, and round-to-nearest-even encoding checked at
// every tie point between adjacent F16 values. All comparisons are exact: these conversions have
// one correct answer.
#include "kernels/cpu/half.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace ssd::kernels {
namespace {

TEST(Half, Fp16DecodesKnownValues) {
  EXPECT_EQ(float_bits(fp16_to_fp32(0x0000)), float_bits(0.0f));
  EXPECT_EQ(float_bits(fp16_to_fp32(0x8000)), float_bits(-0.0f));
  EXPECT_EQ(fp16_to_fp32(0x3c00), 1.0f);
  EXPECT_EQ(fp16_to_fp32(0xc000), -2.0f);
  EXPECT_EQ(fp16_to_fp32(0x3555), 0.333251953125f);
  EXPECT_EQ(fp16_to_fp32(0x7bff), 65504.0f);
  EXPECT_EQ(fp16_to_fp32(0x0400), std::ldexp(1.0f, -14));      // smallest normal
  EXPECT_EQ(fp16_to_fp32(0x0001), std::ldexp(1.0f, -24));      // smallest subnormal
  EXPECT_EQ(fp16_to_fp32(0x83ff), -std::ldexp(1023.0f, -24));  // largest subnormal
  EXPECT_EQ(fp16_to_fp32(0x7c00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(fp16_to_fp32(0xfc00), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(fp16_to_fp32(0x7e00)));
  EXPECT_TRUE(std::isnan(fp16_to_fp32(0xfc01)));
}

TEST(Half, Fp16RoundTripsEveryPattern) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = fp16_to_fp32(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      const uint16_t back = fp32_to_fp16(f);
      EXPECT_TRUE((back & 0x7c00) == 0x7c00 && (back & 0x3ff) != 0) << h;
    } else {
      ASSERT_EQ(fp32_to_fp16(f), h) << "pattern " << h;
    }
  }
}

// Between each pair of adjacent positive finite F16 values a < b: the midpoint goes to the one
// with the even pattern, and anything strictly nearer one side goes to that side.
TEST(Half, Fp16EncodeRoundsToNearestEven) {
  for (uint16_t h = 0; h < 0x7bff; ++h) {
    const float a = fp16_to_fp32(h), b = fp16_to_fp32(static_cast<uint16_t>(h + 1));
    const float mid = (a + b) / 2;  // exact: F16 has 11 significant bits, float 24
    const uint16_t even = (h & 1) ? static_cast<uint16_t>(h + 1) : h;
    ASSERT_EQ(fp32_to_fp16(mid), even) << "tie above pattern " << h;
    ASSERT_EQ(fp32_to_fp16(std::nextafter(mid, 0.0f)), h) << h;
    ASSERT_EQ(fp32_to_fp16(std::nextafter(mid, 1e9f)), h + 1) << h;
    ASSERT_EQ(fp32_to_fp16(-mid), 0x8000 | even) << h;
  }
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1.0f, -25)), 0x0000);  // half the smallest subnormal: tie to 0
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1.0f, -26)), 0x0000);
  EXPECT_EQ(fp32_to_fp16(std::ldexp(3.0f, -25)), 0x0002);     // 1.5 units: tie to even 2
  EXPECT_EQ(fp32_to_fp16(std::ldexp(2047.0f, -25)), 0x0400);  // subnormal tie carries to normal
  EXPECT_EQ(fp32_to_fp16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  EXPECT_EQ(fp32_to_fp16(1.0f + std::ldexp(3.0f, -11)), 0x3c02);
}

TEST(Half, Fp16EncodeOverflowAndSpecials) {
  EXPECT_EQ(fp32_to_fp16(65519.0f), 0x7bff);
  EXPECT_EQ(fp32_to_fp16(65520.0f), 0x7c00);  // the tie above the largest finite goes to inf
  EXPECT_EQ(fp32_to_fp16(1e10f), 0x7c00);
  EXPECT_EQ(fp32_to_fp16(-1e10f), 0xfc00);
  EXPECT_EQ(fp32_to_fp16(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(fp32_to_fp16(-0.0f), 0x8000);
  EXPECT_EQ(fp32_to_fp16(1e-30f), 0x0000);
  const uint16_t nan = fp32_to_fp16(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan & 0x7c00, 0x7c00);
  EXPECT_NE(nan & 0x03ff, 0);
  // A signalling NaN whose payload lives only in low bits must not become infinity.
  const uint16_t snan = fp32_to_fp16(float_from_bits(0x7f800001u));
  EXPECT_NE(snan & 0x03ff, 0);
}

TEST(Half, Bf16DecodesAndRoundTrips) {
  EXPECT_EQ(bf16_to_fp32(0x3f80), 1.0f);
  EXPECT_EQ(bf16_to_fp32(0xc040), -3.0f);
  EXPECT_EQ(bf16_to_fp32(0x0001), std::ldexp(1.0f, -133));  // smallest subnormal
  EXPECT_EQ(bf16_to_fp32(0xff80), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(bf16_to_fp32(0x7fc0)));
  for (uint32_t b = 0; b < 65536; ++b) {
    const float f = bf16_to_fp32(static_cast<uint16_t>(b));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(bf16_to_fp32(fp32_to_bf16(f)))) << b;
    } else {
      ASSERT_EQ(fp32_to_bf16(f), b) << "pattern " << b;
    }
  }
}

TEST(Half, Bf16EncodeRoundsToNearestEven) {
  EXPECT_EQ(fp32_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);  // tie, 0x3f80 is even
  EXPECT_EQ(fp32_to_bf16(1.0f + std::ldexp(3.0f, -8)), 0x3f82);  // tie, 0x3f82 is even
  EXPECT_EQ(fp32_to_bf16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)), 0x3f81);
  EXPECT_EQ(fp32_to_bf16(-(1.0f + std::ldexp(3.0f, -8))), 0xbf82);
  EXPECT_EQ(fp32_to_bf16(std::numeric_limits<float>::max()), 0x7f80);  // rounds up to inf
  EXPECT_EQ(fp32_to_bf16(std::ldexp(1.0f, -140)), 0x0000);             // below half the step
  EXPECT_EQ(fp32_to_bf16(std::ldexp(3.0f, -134)), 0x0002);  // 1.5 subnormal units: tie to even
  // Signalling NaN with payload only in the low 16 bits stays NaN (not infinity).
  EXPECT_TRUE(std::isnan(bf16_to_fp32(fp32_to_bf16(float_from_bits(0x7f800001u)))));
}

}  // namespace
}  // namespace ssd::kernels
