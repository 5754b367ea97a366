// Dispatched row kernels against their scalar reference twins, on every instruction set this CPU
// can run (force_isa), for every type, on awkward lengths (not powers of two; float rows that do
// not fill a 32-value chunk) and unaligned activation pointers.
//
// Tolerances:
//   dequantize_row: exact (bit-identical, NaN == NaN). Every decoded value is an exact product of
//     small integers and f16 scales plus at most one rounded addition, so any correct order of
//     operations gives the same float.
//   dot_row vs ref::dot_row (float64): |err| <= 1e-5 * sum_i |w_i * x_i| + 1e-6. The float32
//     kernels add at most ~n/16 + 8 terms in a row per accumulator (< 60 here), whose rounding
//     error is bounded by ~60 * 2^-24 = 3.6e-6 of the absolute sum.
#include "kernels/cpu/rowops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "kernel_test_util.h"
#include "runtime/core/error.h"

namespace ssd::kernels {
namespace {

using test::IsaGuard;
using test::kAllTypes;

std::vector<int64_t> lengths_for(DType t) {
  switch (dtype_traits(t).block_elems) {
    case 1:
      return {1, 7, 31, 33, 100, 224, 1000};
    case 32:
      return {32, 32 * 7, 32 * 19, 32 * 37};
    default:
      return {256, 256 * 3};
  }
}

TEST(RowOps, IsaDetectionAndForcing) {
  IsaGuard guard;
  EXPECT_EQ(active_isa(), detected_isa());
  for (Isa isa : test::runnable_isas()) {
    force_isa(isa);
    EXPECT_EQ(active_isa(), isa);
  }
  if (detected_isa() < Isa::Avx512) {
    EXPECT_THROW(force_isa(Isa::Avx512), Error);
  }
  std::printf("detected ISA: %s\n", isa_name(detected_isa()));
}

TEST(RowOps, DequantizeMatchesReferenceExactly) {
  IsaGuard guard;
  std::mt19937 rng(1);
  for (DType t : kAllTypes)
    for (int64_t n : lengths_for(t)) {
      const auto row = test::random_row(t, n, rng);
      std::vector<float> want(n), got(n);
      ref::dequantize_row(t, row.data(), want.data(), n);
      for (Isa isa : test::runnable_isas()) {
        force_isa(isa);
        std::fill(got.begin(), got.end(), -12345.0f);
        dequantize_row(t, row.data(), got.data(), n);
        for (int64_t i = 0; i < n; ++i)
          ASSERT_TRUE(test::same_float(got[i], want[i]))
              << dtype_name(t) << " n=" << n << " isa=" << isa_name(isa) << " i=" << i << ": "
              << got[i] << " vs " << want[i];
      }
    }
}

TEST(RowOps, DotMatchesFloat64Reference) {
  IsaGuard guard;
  std::mt19937 rng(2);
  for (DType t : kAllTypes)
    for (int64_t n : lengths_for(t)) {
      const auto row = test::random_row(t, n, rng);
      const auto xbuf = test::random_floats(n + 1, rng);
      const float* x = xbuf.data() + 1;  // deliberately not 32-byte aligned
      std::vector<float> w(n);
      ref::dequantize_row(t, row.data(), w.data(), n);
      double abs_sum = 0.0;
      for (int64_t i = 0; i < n; ++i) abs_sum += std::fabs(static_cast<double>(w[i]) * x[i]);
      const double want = ref::dot_row(t, row.data(), x, n);
      for (Isa isa : test::runnable_isas()) {
        force_isa(isa);
        const double got = dot_row(t, row.data(), x, n);
        EXPECT_NEAR(got, want, 1e-5 * abs_sum + 1e-6)
            << dtype_name(t) << " n=" << n << " isa=" << isa_name(isa);
      }
    }
}

// A structural check that the reference itself has the documented element order: one non-zero
// quant at a time must show up at exactly the element the layout in quant_blocks.h names.
TEST(RowOps, ReferenceElementOrder) {
  std::vector<float> y(256);
  {
    BlockQ4_0 b{};
    b.d = fp32_to_fp16(1.0f);
    for (auto& q : b.qs) q = 0x88;  // all zero values
    b.qs[3] = 0x8b;                 // element 3 -> 11 - 8 = 3
    b.qs[5] = 0x28;                 // element 21 -> 2 - 8 = -6
    ref::dequantize_row(DType::Q4_0, &b, y.data(), 32);
    for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], j == 3 ? 3.0f : j == 21 ? -6.0f : 0.0f) << j;
  }
  {
    BlockQ4_K b{};
    b.d = fp32_to_fp16(1.0f);
    b.dmin = fp32_to_fp16(0.5f);
    const int sc[8] = {1, 2, 3, 4, 5, 6, 7, 63}, m[8] = {0, 1, 0, 0, 0, 0, 0, 40};
    q4k_pack_scale_min(sc, m, b.scales);
    b.qs[32 * 3 + 4] = 0x20;  // sub-block 7 (high nibbles of bytes 96..127), element 4: q = 2
    ref::dequantize_row(DType::Q4_K, &b, y.data(), 256);
    EXPECT_EQ(y[7 * 32 + 4], 63.0f * 2 - 0.5f * 40);
    EXPECT_EQ(y[7 * 32 + 5], -0.5f * 40);
    EXPECT_EQ(y[1 * 32 + 0], -0.5f);  // sub-block 1: q = 0, min 1
    EXPECT_EQ(y[6 * 32 + 9], 0.0f);
  }
  {
    BlockQ6_K b{};
    b.d = fp32_to_fp16(0.5f);
    for (auto& s : b.scales) s = 2;
    b.scales[13] = -4;
    // Every quant 32 (value 0), except element 128 + 82 = 210: q = 0x2d (low 0xd, high 2).
    for (auto& q : b.ql) q = 0x00;
    for (auto& q : b.qh) q = 0xaa;  // high bits 2 everywhere -> q = 32
    b.ql[64 + 82 - 64] = 0xd0;      // i = 82 >= 64: high nibble of ql[64 + 18]
    ref::dequantize_row(DType::Q6_K, &b, y.data(), 256);
    for (int e = 0; e < 256; ++e) EXPECT_EQ(y[e], e == 210 ? 0.5f * -4 * (0x2d - 32) : 0.0f) << e;
  }
}

TEST(RowOps, RejectsPartialBlocks) {
  std::vector<uint8_t> buf(1024);
  std::vector<float> f(300);
  EXPECT_THROW(dequantize_row(DType::Q4_1, buf.data(), f.data(), 48), Error);
  EXPECT_THROW(dot_row(DType::Q6_K, buf.data(), f.data(), 128), Error);
  EXPECT_THROW(quantize_row(DType::Q8_0, f.data(), buf.data(), 40), Error);
}

}  // namespace
}  // namespace ssd::kernels
