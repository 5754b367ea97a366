// CPU twins of the device decoders (kernels/common/half_math.h, dequant.h) against the CPU
// kernels. Tolerance: none. These are integer manipulations and unfused float products, so the
// twin must reproduce kernels/cpu/half.h and kernels::ref::dequantize_row bit for bit (NaN
// payloads included); the device compiles the same functions with __fmul_rn / __fadd_rn.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "kernels/common/dequant.h"
#include "kernels/common/half_math.h"
#include "kernels/cpu/half.h"
#include "kernels/cpu/rowops.h"
#include "tests/unit/kernels/kernel_test_util.h"

namespace ssd::kernels {
namespace {

uint32_t bits(float f) { return hd::f32_bits(f); }

TEST(HalfTwin, DecodesEvery16BitPatternLikeTheCpu) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const auto u = static_cast<uint16_t>(h);
    ASSERT_EQ(bits(hd::fp16_to_fp32(u)), bits(fp16_to_fp32(u))) << "f16 pattern " << h;
    ASSERT_EQ(bits(hd::bf16_to_fp32(u)), bits(bf16_to_fp32(u))) << "bf16 pattern " << h;
  }
}

TEST(HalfTwin, EncodesLikeTheCpuOnRandomAndEdgeFloats) {
  std::mt19937 rng(5);
  std::vector<uint32_t> pats = {0u,          0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00001u,
                                0x33000000u, 0x33000001u, 0x38800000u, 0x387fffffu, 0x477ff000u,
                                0x477fefffu, 0x00000001u, 0x7f7fffffu};
  for (int i = 0; i < 1 << 20; ++i) pats.push_back(static_cast<uint32_t>(rng()));
  for (uint32_t p : pats) {
    const float f = hd::f32_from_bits(p);
    ASSERT_EQ(hd::fp32_to_fp16(f), fp32_to_fp16(f)) << std::hex << p;
    ASSERT_EQ(hd::fp32_to_bf16(f), fp32_to_bf16(f)) << std::hex << p;
  }
}

// Every element of `rows` random rows (awkward column counts: 1, 3 and 7 blocks) decoded by the
// twin equals the reference row decoder's output bit for bit.
void expect_rows_match(DType t, std::mt19937& rng) {
  const int64_t be = dtype_traits(t).block_elems == 1 ? 32 : dtype_traits(t).block_elems;
  for (int64_t blocks : {1, 3, 7}) {
    const int64_t cols = blocks * be;
    for (int rep = 0; rep < 20; ++rep) {
      std::vector<uint8_t> row = test::random_row(t, cols, rng);
      if (rep % 2 == 1)  // raw bytes: every field random (scales may be subnormal, inf or NaN)
        for (auto& b : row) b = static_cast<uint8_t>(rng());
      std::vector<float> want(static_cast<size_t>(cols));
      ref::dequantize_row(t, row.data(), want.data(), cols);
      for (int64_t i = 0; i < cols; ++i)
        ASSERT_EQ(bits(hd::dequant_elem(t, row.data(), i)), bits(want[i]))
            << dtype_traits(t).name << " cols " << cols << " element " << i << " rep " << rep;
    }
  }
}

TEST(DequantTwin, EveryTypeMatchesTheReferenceDecoderBitForBit) {
  std::mt19937 rng(11);
  for (DType t : test::kAllTypes) expect_rows_match(t, rng);
}

TEST(DequantTwin, QuantizedRowsRoundTripThroughTheTwin) {
  // Rows written by the project's own quantizer (kernels::quantize_row), as in a model file.
  std::mt19937 rng(3);
  for (DType t : {DType::Q4_0, DType::Q4_1, DType::Q8_0, DType::Q4_K, DType::Q6_K}) {
    const int64_t cols = 2 * 256;
    const std::vector<float> src = test::random_floats(cols, rng);
    std::vector<uint8_t> row(dtype_row_bytes(t, cols));
    quantize_row(t, src.data(), row.data(), cols);
    std::vector<float> want(cols);
    dequantize_row(t, row.data(), want.data(), cols);
    for (int64_t i = 0; i < cols; ++i)
      ASSERT_EQ(bits(hd::dequant_elem(t, row.data(), i)), bits(want[i]))
          << dtype_traits(t).name << " element " << i;
  }
}

TEST(DequantTwin, Q4KScaleUnpackingMatchesTheCpuHelper) {
  for (int trial = 0; trial < 256; ++trial) {
    uint8_t s[12];
    for (int i = 0; i < 12; ++i) s[i] = static_cast<uint8_t>(trial * 37 + i * 101);
    for (int j = 0; j < 8; ++j) {
      int a = 0, b = 0, c = 0, d = 0;
      hd::q4k_scale_min(s, j, &a, &b);
      q4k_scale_min(s, j, &c, &d);
      ASSERT_EQ(a, c);
      ASSERT_EQ(b, d);
    }
  }
}

}  // namespace
}  // namespace ssd::kernels
