// matmul against matmul_ref (float64) for every type and every runnable ISA, with and without a
// thread pool, on awkward shapes: 19 rows (not a multiple of any thread count), n = 1, 3, 17
// and 6 tokens (17 = four full groups of 4 tokens plus one, 6 = 4 + 2: every group size the dot
// kernels have), padded row strides.
//
// Tolerance per output: |y - y_ref| <= 1e-5 * sum_c |W[r,c] x[t,c]| + 1e-6 (see rowops_test.cpp
// for the derivation; matmul uses the same dot kernels).
#include "kernels/cpu/matmul.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "kernel_test_util.h"
#include "kernels/cpu/thread_pool.h"
#include "runtime/core/error.h"

namespace ssd::kernels {
namespace {

struct Matrix {
  std::vector<uint8_t> bytes;
  WeightMatrix w;
};

// rows x cols of type t, each row padded by `pad` bytes to check that row_bytes is honoured.
Matrix random_matrix(DType t, int64_t rows, int64_t cols, uint64_t pad, std::mt19937& rng) {
  Matrix m;
  const uint64_t rb = dtype_row_bytes(t, cols) + pad;
  m.bytes.assign(rb * rows, 0xee);
  for (int64_t r = 0; r < rows; ++r) {
    const auto row = test::random_row(t, cols, rng);
    std::copy(row.begin(), row.end(), m.bytes.begin() + r * rb);
  }
  m.w = {t, m.bytes.data(), rows, cols, rb};
  return m;
}

TEST(Matmul, MatchesReferenceOnEveryIsaAndPool) {
  test::IsaGuard guard;
  std::mt19937 rng(3);
  ThreadPool pool2(2), pool3(3);
  ThreadPool* pools[] = {nullptr, &pool2, &pool3};
  const int64_t rows = 19;
  for (DType t : test::kAllTypes) {
    const int64_t be = dtype_traits(t).block_elems;
    const int64_t cols = be == 256 ? 256 * 3 : be == 32 ? 32 * 7 : 100;
    const auto m = random_matrix(t, rows, cols, /*pad=*/t == DType::F32 ? 4 : 2, rng);
    std::vector<float> w(cols);
    for (int64_t n : {1, 3, 6, 17}) {
      const auto x = test::random_floats(n * cols, rng);  // [n, cols]
      std::vector<float> want(n * rows), got(n * rows);   // [n, rows]
      matmul_ref(m.w, x.data(), want.data(), n);
      std::vector<double> abs_sum(n * rows, 0.0);
      for (int64_t r = 0; r < rows; ++r) {
        ref::dequantize_row(t, m.bytes.data() + r * m.w.row_bytes, w.data(), cols);
        for (int64_t i = 0; i < n; ++i)
          for (int64_t c = 0; c < cols; ++c)
            abs_sum[i * rows + r] += std::fabs(static_cast<double>(w[c]) * x[i * cols + c]);
      }
      for (Isa isa : test::runnable_isas()) {
        force_isa(isa);
        for (ThreadPool* pool : pools) {
          std::fill(got.begin(), got.end(), std::nanf(""));
          matmul(m.w, x.data(), got.data(), n, pool);
          for (int64_t k = 0; k < n * rows; ++k)
            ASSERT_NEAR(got[k], want[k], 1e-5 * abs_sum[k] + 1e-6)
                << dtype_name(t) << " n=" << n << " isa=" << isa_name(isa)
                << " threads=" << (pool ? pool->size() : 1) << " token=" << k / rows
                << " row=" << k % rows;
        }
      }
    }
  }
}

// The reference itself against a hand-computed product.
TEST(Matmul, ReferenceOnHandExample) {
  const float wdata[] = {1, 2, 3, -1, 0, 0.5f};  // [2 rows, 3 cols]
  const float x[] = {1, 1, 1, 2, -1, 4};         // [2 tokens, 3 cols]
  const WeightMatrix w{DType::F32, reinterpret_cast<const uint8_t*>(wdata), 2, 3, 12};
  float y[4];
  matmul_ref(w, x, y, 2);
  EXPECT_EQ(y[0], 6.0f);   // token 0, row 0
  EXPECT_EQ(y[1], -0.5f);  // token 0, row 1
  EXPECT_EQ(y[2], 12.0f);  // token 1, row 0: 2 - 2 + 12
  EXPECT_EQ(y[3], 0.0f);   // token 1, row 1: -2 + 0 + 2
  float z[4];
  matmul(w, x, z, 2, nullptr);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(z[i], y[i], 1e-6);
}

TEST(Matmul, RejectsBadShapes) {
  std::vector<uint8_t> buf(4096);
  std::vector<float> x(1024), y(1024);
  WeightMatrix w{DType::Q4_1, buf.data(), 4, 48, 40};  // 48 is not a multiple of 32
  EXPECT_THROW(matmul(w, x.data(), y.data(), 1, nullptr), Error);
  w = {DType::Q4_1, buf.data(), 4, 64, 39};  // a 64-column Q4_1 row needs 40 bytes
  EXPECT_THROW(matmul(w, x.data(), y.data(), 1, nullptr), Error);
}

}  // namespace
}  // namespace ssd::kernels
