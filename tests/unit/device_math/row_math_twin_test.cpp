// CPU twins of the device row arithmetic (kernels/common/row_math.h) against the CPU kernels
// (kernels/cpu/ops.h) and float64 references, on awkward shapes (odd row counts, head_dim 64,
// 128 and 80, partial rotary, empty inputs).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/common/row_math.h"
#include "kernels/cpu/ops.h"
#include "tests/unit/kernels/kernel_test_util.h"

namespace ssd::kernels {
namespace {

uint32_t bits(float f) { return hd::f32_bits(f); }

// RMSNorm with the twin's pieces and the CPU's sequential float64 sum is the CPU kernel bit for
// bit; with the device's strided-tree sum (256 threads) the float64 sum of squares differs by a
// few ulp of float64, so the float32 scale is the same or one ulp apart: the tolerance is 1 ulp
// of the scale, i.e. |diff| <= 2^-23 * |y| (times 2 for the second rounding by g).
TEST(RmsNormTwin, SequentialSumIsTheCpuKernelAndTreeSumIsWithinOneUlp) {
  std::mt19937 rng(1);
  for (int64_t dim : {1, 64, 80, 576, 1000}) {
    const int64_t rows = 7;
    const auto x = test::random_floats(rows * dim, rng, 3.0f);
    const auto g = test::random_floats(dim, rng);
    std::vector<float> want(rows * dim);
    rmsnorm(x.data(), g.data(), want.data(), rows, dim, 1e-5f);
    for (int64_t r = 0; r < rows; ++r) {
      const float* xr = x.data() + r * dim;
      double ss = 0;
      for (int64_t i = 0; i < dim; ++i) ss += static_cast<double>(xr[i]) * xr[i];
      const float seq = hd::rms_inv_scale(ss, dim, 1e-5f);
      const double tree_ss = hd::strided_tree_sum(dim, hd::kRowThreads, [&](int64_t i) {
        return static_cast<double>(xr[i]) * xr[i];
      });
      EXPECT_NEAR(tree_ss, ss, 1e-14 * ss) << "dim " << dim;
      const float tree = hd::rms_inv_scale(tree_ss, dim, 1e-5f);
      for (int64_t i = 0; i < dim; ++i) {
        const float w = want[r * dim + i];
        ASSERT_EQ(bits(hd::rmsnorm_apply(xr[i], seq, g[i])), bits(w)) << dim << " " << i;
        ASSERT_NEAR(hd::rmsnorm_apply(xr[i], tree, g[i]), w, 2.5e-7f * std::abs(w) + 1e-30f);
      }
    }
  }
}

TEST(RmsNormTwin, TreeSumOrderIsTheDocumentedOne) {
  // With T = 4 threads over n = 10 terms: partials {0+4+8, 1+5+9, 2+6, 3+7}, then (p0+p2)+(p1+p3).
  const double v[10] = {1e16, 1, 1, 1, -1e16, 1, 1, 1, 1, 1};
  const double got = hd::strided_tree_sum(10, 4, [&](int64_t i) { return v[i]; });
  const double p0 = (v[0] + v[4]) + v[8], p1 = (v[1] + v[5]) + v[9], p2 = v[2] + v[6],
               p3 = v[3] + v[7];
  EXPECT_EQ(got, (p0 + p2) + (p1 + p3));
  EXPECT_EQ(hd::strided_tree_sum(0, 256, [](int64_t) { return 1.0; }), 0.0);  // empty row
}

// RoPE: the twin's pair rotation with the CPU's float64 angles is kernels::rope bit for bit, for
// both layouts, full and partial rotary, heads of 64, 128 and 80, positions up to 100000.
TEST(RopeTwin, MatchesTheCpuKernelBitForBit) {
  std::mt19937 rng(2);
  for (int64_t head_dim : {64, 128, 80}) {
    for (int64_t rot_dim : {head_dim, head_dim / 2}) {
      for (RopeLayout layout : {RopeLayout::NeoX, RopeLayout::Interleaved}) {
        const int64_t n_heads = 3, half = rot_dim / 2;
        std::vector<float> inv_freq(half);
        for (int64_t i = 0; i < half; ++i)
          inv_freq[i] = static_cast<float>(std::pow(10000.0, -2.0 * i / rot_dim));
        for (float pos : {0.0f, 1.0f, 17.0f, 4095.0f, 100000.0f}) {
          auto x = test::random_floats(n_heads * head_dim, rng);
          auto y = x;
          rope(x.data(), n_heads, head_dim, rot_dim, pos, inv_freq.data(), layout);
          for (int64_t h = 0; h < n_heads; ++h) {
            float* yh = y.data() + h * head_dim;
            for (int64_t i = 0; i < half; ++i) {
              const double th = hd::rope_theta(pos, inv_freq[i]);
              int64_t ia = 0, ib = 0;
              hd::rope_pair_index(layout == RopeLayout::NeoX, i, rot_dim, &ia, &ib);
              hd::rope_pair(yh[ia], yh[ib], static_cast<float>(std::cos(th)),
                            static_cast<float>(std::sin(th)));
            }
          }
          for (size_t i = 0; i < x.size(); ++i)
            ASSERT_EQ(bits(y[i]), bits(x[i])) << "head_dim " << head_dim << " rot " << rot_dim
                                              << " pos " << pos << " i " << i;
        }
      }
    }
  }
}

// SwiGLU: bit for bit the scalar CPU kernel on the host (same expression, same std::exp). On the
// device expf is within 2 ulp, so the device result is within ~3 ulp of this; against float64 the
// twin itself is within 4 ulp (exp 1 ulp, the division and the product 1/2 ulp each).
TEST(SwigluTwin, MatchesTheScalarKernelAndFloat64) {
  std::mt19937 rng(4);
  for (int64_t n : {0, 1, 7, 1001}) {
    auto g = test::random_floats(n, rng, 4.0f);
    auto u = test::random_floats(n, rng, 2.0f);
    if (n > 3) g[0] = -90.0f, g[1] = 90.0f, g[2] = 0.0f;  // exp under/overflow, zero
    std::vector<float> want(n);
    detail::swiglu_scalar(g.data(), u.data(), want.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      const float t = hd::swiglu(g[i], u[i]);
      ASSERT_EQ(bits(t), bits(want[i])) << i;
      const double ref = g[i] / (1.0 + std::exp(-static_cast<double>(g[i]))) * u[i];
      // + 1e-30: at g = -90 exp(90) overflows float, so the float result is -0 where float64
      // gives -2e-37; that is float's range, not the twin.
      ASSERT_NEAR(t, ref, 4 * 1.2e-7 * std::abs(ref) + 1e-30) << i;
    }
  }
}

// GRU unit against the float64 equations (PyTorch convention, the Domino head's). Inputs of
// magnitude <= 4: each float op adds <= 1/2 ulp, tanh/exp <= 2 ulp; 1e-6 absolute on outputs in
// (-1, 1) + |s| covers that with margin and still catches a swapped gate (errors ~1e-1).
TEST(GruTwin, MatchesFloat64Equations) {
  std::mt19937 rng(6);
  std::uniform_real_distribution<float> d(-4.0f, 4.0f);
  auto sig = [](double x) { return 1.0 / (1.0 + std::exp(-x)); };
  for (int i = 0; i < 10000; ++i) {
    const float a = d(rng), b = d(rng), c = d(rng), e = d(rng), f = d(rng), h = d(rng),
                s = d(rng) / 4;
    const double r = sig(double(a) + e), z = sig(double(b) + f);
    const double nn = std::tanh(double(c) + r * h);
    const double want = (1 - z) * nn + z * s;
    ASSERT_NEAR(hd::gru_unit(a, b, c, e, f, h, s), want, 1e-6) << i;
  }
}

}  // namespace
}  // namespace ssd::kernels
