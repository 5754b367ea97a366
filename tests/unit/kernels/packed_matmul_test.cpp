// The integer matmul path (prepare_matmul_weight + matmul on Q4_0, Q4_1, Q8_0, Q4_K, Q6_K):
// against its scalar twin matmul_q8_ref, against the float64 matmul_ref, and for determinism.
// Shapes are awkward on purpose: 37 rows (two full 16-row tiles and a partial one; not a multiple
// of 4, 8 or 16), every n from 1 to 17 (one and two full groups of 8 tokens plus one; groups of
// 4 on AVX2 and scalar), column counts of 1, 3 and 19 blocks (32-value types) or 1 and 3
// super-blocks (K-quants), padded row strides, thread pools of 1, 2 and 3.
//
// Tolerances:
//   kernels vs matmul_q8_ref: exact (bitwise). Both compute the same integer dot products (exact
//     in int32) and the same float32 operations in the same order (packed_matmul_impl.h), so any
//     difference is a bug in the packing or a kernel.
//   matmul_q8_ref vs matmul_ref (float64): the error of 8-bit activations. Each activation block
//     b has scale dx_b = amax_b / 127 and codes q = round(x / dx_b), so |x - dx_b q| <=
//     dx_b / 2 + 3e-7 |x| (the rounding, plus float32 errors of x * (127 / amax) and of dx_b;
//     act_q8_test.cpp). Every term of the integer path, offsets included, is taken against the
//     rounded activations dx_b q (act_q8.h), so it computes sum_i w_i dx_b q_i, whose distance to
//     sum_i w_i x_i is at most sum_b (0.5 + 1e-4) dx_b sum_{i in b} |w_i|. On top comes float32
//     rounding of the per-block scale products and of the accumulation (a chain of at most ~60
//     roundings here, each 2^-24 relative to the running sum: < 4e-6 of the sum of the terms'
//     magnitudes, which are |s_i x_i| for the scaled part s_i of the weight, w_i minus the block
//     offset, and |offset_b| sum |x_i|). So
//       |y - y_ref| <= sum_b (0.5 + 1e-4) dx_b sum_{i in b} |w_i|
//                      + 1e-5 (sum_i |s_i x_i| + sum_b |offset_b| sum_{i in b} |x_i|) + 1e-6.
//     This worst case adds every rounding error with the same sign; the errors are in fact
//     independent and uniform on [-dx/2, dx/2], so the RMS error over all outputs is also held to
//     2x its prediction sqrt(mean sum_i w_i^2 dx^2 / 12) (a statistical bound: over ~600 outputs
//     its estimate is within ~10% of the truth, and a bias or a wrong scale shows at once).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "kernel_test_util.h"
#include "kernels/cpu/act_q8.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/packed_matrix.h"
#include "kernels/cpu/thread_pool.h"
#include "runtime/core/error.h"

namespace ssd::kernels {
namespace {

constexpr DType kPackedTypes[] = {DType::Q4_0, DType::Q4_1, DType::Q8_0, DType::Q4_K, DType::Q6_K};

struct Matrix {
  std::vector<uint8_t> bytes;
  WeightMatrix w;
};

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

std::vector<int64_t> col_counts(DType t) {
  return dtype_traits(t).block_elems == 256 ? std::vector<int64_t>{256, 768}
                                            : std::vector<int64_t>{32, 96, 608};
}

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b, size_t* where) {
  for (size_t i = 0; i < a.size(); ++i)
    if (!test::same_float(a[i], b[i])) return *where = i, false;
  return true;
}

TEST(PackedMatmul, PreparedOnlyForIntegerTypes) {
  std::mt19937 rng(1);
  for (DType t : test::kAllTypes) {
    const auto m = random_matrix(t, 5, dtype_traits(t).block_elems == 256 ? 256 : 64, 0, rng);
    const WeightMatrix p = prepare_matmul_weight(m.w);
    EXPECT_EQ(p.packed != nullptr, has_packed_kernel(t)) << dtype_name(t);
    EXPECT_EQ(p.data, m.w.data);  // the file bytes stay what embedding lookups read
  }
}

TEST(PackedMatmul, SameBytesArePackedOnce) {
  std::mt19937 rng(2);
  const auto m = random_matrix(DType::Q4_1, 20, 64, 0, rng);
  const WeightMatrix a = prepare_matmul_weight(m.w), b = prepare_matmul_weight(m.w);
  EXPECT_EQ(a.packed.get(), b.packed.get());  // a tied embedding / output layer: one copy
  WeightMatrix first_rows = m.w;
  first_rows.rows = 16;
  EXPECT_NE(prepare_matmul_weight(first_rows).packed.get(), a.packed.get());
}

TEST(PackedMatmul, KernelsEqualTwinBitwiseOnEveryIsaThreadCountAndN) {
  test::IsaGuard guard;
  std::mt19937 rng(3);
  ThreadPool pool2(2), pool3(3);
  ThreadPool* pools[] = {nullptr, &pool2, &pool3};
  const int64_t rows = 37;
  for (DType t : kPackedTypes)
    for (int64_t cols : col_counts(t)) {
      const auto m = random_matrix(t, rows, cols, /*pad=*/6, rng);
      const WeightMatrix w = prepare_matmul_weight(m.w);
      ASSERT_TRUE(w.packed);
      const auto x = test::random_floats(17 * cols, rng);  // [17, cols]
      std::vector<float> want(17 * rows);
      matmul_q8_ref(m.w, x.data(), want.data(), 17);
      for (int64_t n = 1; n <= 17; ++n) {
        std::vector<float> got(n * rows);  // [n, rows]
        const std::vector<float> want_n(want.begin(), want.begin() + n * rows);
        for (Isa isa : test::runnable_isas()) {
          force_isa(isa);
          for (ThreadPool* pool : pools) {
            std::fill(got.begin(), got.end(), std::nanf(""));
            matmul(w, x.data(), got.data(), n, pool);
            size_t k = 0;
            ASSERT_TRUE(bitwise_equal(got, want_n, &k))
                << dtype_name(t) << " cols=" << cols << " n=" << n << " isa=" << isa_name(isa)
                << " threads=" << (pool ? pool->size() : 1) << " token=" << k / rows
                << " row=" << k % rows << ": " << got[k] << " vs " << want_n[k];
          }
        }
      }
    }
}

// The offset each block's values share (w_i = s_i + offset, s_i the scaled part).
double block_offset(DType t, const uint8_t* row, int64_t c) {
  switch (t) {
    case DType::Q4_1:
      return fp16_to_fp32(reinterpret_cast<const BlockQ4_1*>(row)[c].m);
    case DType::Q4_K: {
      const auto& b = reinterpret_cast<const BlockQ4_K*>(row)[c / 8];
      int sc, m;
      q4k_scale_min(b.scales, static_cast<int>(c % 8), &sc, &m);
      return -static_cast<double>(fp16_to_fp32(b.dmin)) * m;
    }
    default:
      return 0.0;
  }
}

TEST(PackedMatmul, TwinWithinActivationQuantizationErrorOfFloat64) {
  std::mt19937 rng(4);
  const int64_t rows = 37, n = 17;
  for (DType t : kPackedTypes)
    for (int64_t cols : col_counts(t)) {
      const auto m = random_matrix(t, rows, cols, 0, rng);
      auto x = test::random_floats(n * cols, rng);
      for (int64_t i = 7; i < n * cols; i += 61) x[i] *= 8.0f;  // outliers widen some blocks
      std::vector<float> got(n * rows), want(n * rows);
      matmul_q8_ref(m.w, x.data(), got.data(), n);
      matmul_ref(m.w, x.data(), want.data(), n);
      const int64_t blocks = cols / 32;
      std::vector<float> wrow(cols);
      double sq_err = 0, sq_pred = 0;
      for (int64_t r = 0; r < rows; ++r) {
        const uint8_t* row = m.bytes.data() + r * m.w.row_bytes;
        ref::dequantize_row(t, row, wrow.data(), cols);
        for (int64_t tok = 0; tok < n; ++tok) {
          const float* xt = x.data() + tok * cols;
          double bound = 1e-6, pred = 0;
          for (int64_t b = 0; b < blocks; ++b) {
            double amax = 0, w_abs = 0, w_sq = 0, sx_abs = 0, x_abs = 0;
            const double off = block_offset(t, row, b);
            for (int64_t i = 32 * b; i < 32 * b + 32; ++i) {
              amax = std::max(amax, std::fabs(static_cast<double>(xt[i])));
              w_abs += std::fabs(wrow[i]);
              w_sq += static_cast<double>(wrow[i]) * wrow[i];
              sx_abs += std::fabs((wrow[i] - off) * static_cast<double>(xt[i]));
              x_abs += std::fabs(xt[i]);
            }
            const double dx = amax / 127;
            bound += (0.5 + 1e-4) * dx * w_abs + 1e-5 * (sx_abs + std::fabs(off) * x_abs);
            pred += w_sq * dx * dx / 12;
          }
          const int64_t k = tok * rows + r;
          const double err = got[k] - static_cast<double>(want[k]);
          ASSERT_LE(std::fabs(err), bound)
              << dtype_name(t) << " cols=" << cols << " token=" << tok << " row=" << r;
          sq_err += err * err;
          sq_pred += pred;
        }
      }
      const double rms = std::sqrt(sq_err / (rows * n)), rms_pred = std::sqrt(sq_pred / (rows * n));
      EXPECT_LE(rms, 2 * rms_pred) << dtype_name(t) << " cols=" << cols;
      EXPECT_GT(rms, 0.0) << dtype_name(t) << ": no quantization error at all is not plausible";
    }
}

// Token t's output is bitwise the same alone (n = 1), at any place in a batch of any size, next
// to any other tokens, and at any thread count: what greedy speculative decoding relies on. Run
// for every weight type, on the integer path and the float path (unprepared matrices).
TEST(MatmulDeterminism, TokenOutputIndependentOfBatchAndThreads) {
  test::IsaGuard guard;
  std::mt19937 rng(5);
  ThreadPool pool2(2), pool3(3);
  const int64_t rows = 37;
  for (DType t : test::kAllTypes) {
    const int64_t be = dtype_traits(t).block_elems;
    const int64_t cols = be == 256 ? 512 : be == 32 ? 192 : 100;
    const auto m = random_matrix(t, rows, cols, 0, rng);
    std::vector<WeightMatrix> paths = {m.w};
    if (has_packed_kernel(t)) paths.push_back(prepare_matmul_weight(m.w));
    const auto probe = test::random_floats(cols, rng);
    for (Isa isa : test::runnable_isas()) {
      force_isa(isa);
      for (const WeightMatrix& w : paths) {
        std::vector<float> alone(rows);
        matmul(w, probe.data(), alone.data(), 1, nullptr);
        for (int64_t n : {2, 3, 5, 8, 9, 16, 17})
          for (ThreadPool* pool : {&pool2, &pool3}) {
            auto x = test::random_floats(n * cols, rng, 3.0f);  // other tokens, other scales
            const int64_t at = static_cast<int64_t>(rng() % n);
            std::copy(probe.begin(), probe.end(), x.begin() + at * cols);
            std::vector<float> y(n * rows);
            matmul(w, x.data(), y.data(), n, pool);
            for (int64_t r = 0; r < rows; ++r)
              ASSERT_TRUE(test::same_float(y[at * rows + r], alone[r]))
                  << dtype_name(t) << (w.packed ? " integer" : " float")
                  << " path, isa=" << isa_name(isa) << " n=" << n << " at=" << at
                  << " threads=" << pool->size() << " row=" << r << ": " << y[at * rows + r]
                  << " vs " << alone[r];
          }
      }
    }
  }
}

TEST(PackedMatmul, NonFiniteActivationStaysInItsToken) {
  std::mt19937 rng(6);
  const auto m = random_matrix(DType::Q4_1, 16, 64, 0, rng);
  const WeightMatrix w = prepare_matmul_weight(m.w);
  auto x = test::random_floats(3 * 64, rng);
  x[64 + 5] = std::numeric_limits<float>::infinity();
  x[128 + 40] = std::nanf("");
  std::vector<float> y(3 * 16);
  matmul(w, x.data(), y.data(), 3, nullptr);
  for (int r = 0; r < 16; ++r) {
    EXPECT_TRUE(std::isfinite(y[r])) << r;
    EXPECT_FALSE(std::isfinite(y[16 + r])) << r;
    EXPECT_FALSE(std::isfinite(y[32 + r])) << r;
  }
}

}  // namespace
}  // namespace ssd::kernels
