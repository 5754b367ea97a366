// The CUDA backend's batch-invariant matmul (kernels/cuda/matmul.cu, n <= invariant_max_tokens)
// reads the stored weight bytes and decodes them in the kernel: its outputs must be the host
// twin's bits exactly (hd::warp_order_dot over dequant_elem, tested against the CPU reference in
// tests/unit/device_math/invariant_matmul_twin_test.cpp) for every weight type, at awkward sizes
// (67 rows, 3 blocks of columns), and a token's row must not depend on the batch it is in.
// Tolerance: none (the same fused multiply-adds in the same order). Needs a GPU; skips visibly
// without one, and has not run yet (no GPU here).
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "kernels/common/dequant.h"
#include "kernels/common/invariant_dot.h"
#include "runtime/backend/backend.h"
#include "tests/unit/cuda/skip_without_gpu.h"
#include "tests/unit/kernels/kernel_test_util.h"

namespace ssd {
namespace {

TEST(CudaInvariantMatmul, DecodesStoredBytesWithTheTwinsBitsAtEveryBatchSize) {
  SSD_SKIP_WITHOUT_GPU("device matmul vs its CPU twin");
  std::unique_ptr<Backend> gpu = make_cuda_backend(0);
  std::mt19937 rng(3);
  for (DType t : kernels::test::kAllTypes) {
    const int64_t rows = 67, cols = 3 * std::max<int64_t>(32, dtype_traits(t).block_elems);
    std::vector<uint8_t> bytes;
    const TensorRef ref = kernels::test::random_matrix(t, rows, cols, bytes, rng);
    const uint64_t row_bytes = ref.row_bytes();
    const auto w = gpu->prepare_weight(ref);
    const int64_t n = 9;
    const auto x = kernels::test::random_floats(n * cols, rng);
    std::vector<float> y(static_cast<size_t>(n * rows)), y1(static_cast<size_t>(rows));
    gpu->matmul(w, x.data(), y.data(), n);
    for (int64_t tok = 0; tok < n; ++tok) {
      for (int64_t r = 0; r < rows; ++r) {
        const uint8_t* wr = bytes.data() + r * row_bytes;
        const float* xt = x.data() + tok * cols;
        const float want = kernels::hd::warp_order_dot(
            [&](int64_t c) { return kernels::hd::dequant_elem(t, wr, c); },
            [&](int64_t c) { return xt[c]; }, cols);
        ASSERT_EQ(kernels::hd::f32_bits(y[tok * rows + r]), kernels::hd::f32_bits(want))
            << dtype_traits(t).name << " token " << tok << " row " << r;
      }
    }
    gpu->matmul(w, x.data() + 4 * cols, y1.data(), 1);  // token 4 alone: the same bits
    for (int64_t r = 0; r < rows; ++r)
      ASSERT_EQ(kernels::hd::f32_bits(y1[r]), kernels::hd::f32_bits(y[4 * rows + r])) << r;
  }
}

}  // namespace
}  // namespace ssd
