// The CPU twin of the batch-invariant matmul (kernels/common/invariant_dot.h with dequant.h's
// decoder, what kernels/cuda/matmul.cu runs per output) against the CPU reference:
//   - decoding in the kernel changes nothing: the twin over the stored bytes (dequant_elem per
//     element) gives the same bits as the twin over the row decoded first by
//     kernels::ref::dequantize_row;
//   - the lane order is a correct dot product: within (ceil(cols / 32) + 5) x 2^-24 x sum |w x| of
//     a double-precision sum of the decoded row (the rounding bound of FP32 accumulation: each
//     lane adds at most ceil(cols / 32) terms, then 5 butterfly additions), for every weight type
//     and awkward column counts (one block, several, and a length that is not a multiple of 32
//     for the per-element types).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/common/dequant.h"
#include "kernels/common/invariant_dot.h"
#include "kernels/cpu/rowops.h"
#include "tests/unit/kernels/kernel_test_util.h"

namespace ssd::kernels {
namespace {

TEST(InvariantMatmulTwin, DecodingInTheKernelEqualsDecodingFirstAndIsAnAccurateDot) {
  std::mt19937 rng(11);
  for (DType t : test::kAllTypes) {
    const int64_t be = dtype_traits(t).block_elems;
    std::vector<int64_t> col_counts = {be, 3 * be, 9 * be};
    if (be == 1) col_counts.push_back(45);
    for (int64_t cols : col_counts) {
      for (int rep = 0; rep < 8; ++rep) {
        const std::vector<uint8_t> row = test::random_row(t, cols, rng);
        const std::vector<float> x = test::random_floats(cols, rng);
        std::vector<float> decoded(static_cast<size_t>(cols));
        ref::dequantize_row(t, row.data(), decoded.data(), cols);

        auto xs = [&](int64_t c) { return x[static_cast<size_t>(c)]; };
        const float in_kernel = hd::warp_order_dot(
            [&](int64_t c) { return hd::dequant_elem(t, row.data(), c); }, xs, cols);
        const float first =
            hd::warp_order_dot([&](int64_t c) { return decoded[static_cast<size_t>(c)]; }, xs,
                               cols);
        ASSERT_EQ(hd::f32_bits(in_kernel), hd::f32_bits(first))
            << dtype_traits(t).name << " cols " << cols;

        double exact = 0, mag = 0;
        for (int64_t c = 0; c < cols; ++c) {
          exact += static_cast<double>(decoded[c]) * x[c];
          mag += std::abs(static_cast<double>(decoded[c]) * x[c]);
        }
        const double bound = static_cast<double>((cols + 31) / 32 + 5) * std::ldexp(1.0, -24);
        EXPECT_LE(std::abs(in_kernel - exact), bound * mag)
            << dtype_traits(t).name << " cols " << cols << " rep " << rep;
      }
    }
  }
}

}  // namespace
}  // namespace ssd::kernels
