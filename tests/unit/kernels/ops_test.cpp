// rmsnorm / softmax / swiglu / rope against float64 references written inline, plus RoPE pair
// layouts on a hand-computed example. SwiGLU runs on every ISA this CPU has (its AVX2 / AVX-512
// versions use a polynomial exp of ~2 ulp, inside the same tolerance) and must give an element
// the same bits wherever it sits in the array (the backend splits arrays across threads).
// Tolerances (float32 kernels vs float64): rmsnorm and swiglu 2e-6 relative + 1e-7 absolute per
// element (a handful of roundings); softmax 1e-6 absolute per probability (values <= 1); rope
// 1e-5 absolute for |x| ~ 1 (cos/sin rounded to float, two products and a sum).
#include "kernels/cpu/ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "kernel_test_util.h"

namespace ssd::kernels {
namespace {

TEST(Ops, RmsNormMatchesFloat64) {
  std::mt19937 rng(5);
  const int64_t rows = 3, dim = 577;
  const auto x = test::random_floats(rows * dim, rng, 3.0f);
  const auto g = test::random_floats(dim, rng);
  std::vector<float> y(rows * dim);
  const float eps = 1e-5f;
  rmsnorm(x.data(), g.data(), y.data(), rows, dim, eps);
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (int64_t i = 0; i < dim; ++i) ss += static_cast<double>(x[r * dim + i]) * x[r * dim + i];
    const double inv = 1.0 / std::sqrt(ss / dim + eps);
    for (int64_t i = 0; i < dim; ++i) {
      const double want = x[r * dim + i] * inv * g[i];
      ASSERT_NEAR(y[r * dim + i], want, 2e-6 * std::fabs(want) + 1e-7) << r << "," << i;
    }
  }
  // In place gives the same result.
  auto z = x;
  rmsnorm(z.data(), g.data(), z.data(), rows, dim, eps);
  for (int64_t i = 0; i < rows * dim; ++i) ASSERT_EQ(z[i], y[i]);
}

TEST(Ops, SoftmaxMatchesFloat64) {
  std::mt19937 rng(6);
  for (int64_t n : {1, 5, 1000}) {
    auto x = test::random_floats(n, rng, 10.0f);
    x[0] = 500.0f;  // large logits must not overflow (max-subtracted)
    std::vector<double> want(n);
    double mx = -1e300, sum = 0;
    for (float v : x) mx = std::max(mx, static_cast<double>(v));
    for (int64_t i = 0; i < n; ++i) sum += want[i] = std::exp(x[i] - mx);
    softmax(x.data(), n);
    double total = 0;
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_NEAR(x[i], want[i] / sum, 1e-6) << i;
      total += x[i];
    }
    EXPECT_NEAR(total, 1.0, 1e-5);
  }
}

TEST(Ops, SwigluMatchesFloat64) {
  std::mt19937 rng(8);
  test::IsaGuard guard;
  for (Isa isa : test::runnable_isas()) {
    force_isa(isa);
    for (int64_t n : {1001, 1536, 7}) {
      auto gate = test::random_floats(n, rng, 4.0f), up = test::random_floats(n, rng);
      gate[0] = -100.0f;  // exp overflow side: silu -> -0
      if (n > 3) {
        gate[1] = 100.0f;
        gate[2] = -87.5f;  // around the edges of the vector exp's range
        gate[3] = 88.0f;
      }
      std::vector<float> out(n);
      swiglu(gate.data(), up.data(), out.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        const double g = gate[i];
        const double want = g / (1.0 + std::exp(-g)) * up[i];
        ASSERT_NEAR(out[i], want, 2e-6 * std::fabs(want) + 1e-7) << isa_name(isa) << " " << i;
      }
      // Any sub-range (odd start, odd length: vector bodies and tails land elsewhere) gives the
      // same bits for the same elements.
      std::vector<float> part(n);
      const int64_t b = n / 3 + 1, len = n - b - 2;
      if (len > 0) {
        swiglu(gate.data() + b, up.data() + b, part.data(), len);
        for (int64_t i = 0; i < len; ++i)
          ASSERT_TRUE(test::same_float(part[i], out[b + i])) << isa_name(isa) << " " << i;
      }
    }
  }
}

// rope() is rope_angles() then rope_rotate(), bit for bit (the backend caches the angles).
TEST(Ops, RopeFromAnglesIsBitIdentical) {
  std::mt19937 rng(10);
  const int64_t heads = 3, hd = 48, rot = 32;
  std::vector<float> inv_freq(rot / 2);
  for (int64_t i = 0; i < rot / 2; ++i) inv_freq[i] = std::pow(10000.0f, -2.0f * i / rot);
  for (auto layout : {RopeLayout::Interleaved, RopeLayout::NeoX}) {
    const auto x0 = test::random_floats(heads * hd, rng);
    auto x = x0, y = x0;
    rope(x.data(), heads, hd, rot, 1234.0f, inv_freq.data(), layout);
    std::vector<float> c(rot / 2), s(rot / 2);
    rope_angles(1234.0f, inv_freq.data(), rot, c.data(), s.data());
    rope_rotate(y.data(), heads, hd, rot, c.data(), s.data(), layout);
    for (size_t i = 0; i < x.size(); ++i) ASSERT_TRUE(test::same_float(x[i], y[i])) << i;
  }
}

// head_dim 6, rot_dim 4 (the last two dims are not rotated), 2 heads, pos 2, inv_freq {0.5, 0.25}:
// angles 1 and 0.5.
TEST(Ops, RopePairLayoutsOnHandExample) {
  const float inv_freq[] = {0.5f, 0.25f};
  const float c1 = std::cos(1.0f), s1 = std::sin(1.0f), c2 = std::cos(0.5f), s2 = std::sin(0.5f);
  const float in[12] = {1, 2, 3, 4, 5, 6, -1, 0, 0, 1, 7, 8};
  {
    float x[12];
    std::copy(in, in + 12, x);
    rope(x, 2, 6, 4, 2.0f, inv_freq, RopeLayout::Interleaved);  // pairs (0,1) at 1, (2,3) at 0.5
    const float want[12] = {
        1 * c1 - 2 * s1, 1 * s1 + 2 * c1, 3 * c2 - 4 * s2, 3 * s2 + 4 * c2, 5, 6,
        -1 * c1,         -1 * s1,         -1 * s2,         1 * c2,          7, 8};
    for (int i = 0; i < 12; ++i) EXPECT_NEAR(x[i], want[i], 1e-5) << "interleaved " << i;
  }
  {
    float x[12];
    std::copy(in, in + 12, x);
    rope(x, 2, 6, 4, 2.0f, inv_freq, RopeLayout::NeoX);  // pairs (0,2) at 1, (1,3) at 0.5
    const float want[12] = {
        1 * c1 - 3 * s1, 2 * c2 - 4 * s2, 1 * s1 + 3 * c1, 2 * s2 + 4 * c2, 5, 6,
        -1 * c1,         -1 * s2,         -1 * s1,         1 * c2,          7, 8};
    for (int i = 0; i < 12; ++i) EXPECT_NEAR(x[i], want[i], 1e-5) << "neox " << i;
  }
}

// Random heads vs a float64 rotation; also position 0 is the identity and norms are preserved.
TEST(Ops, RopeMatchesFloat64) {
  std::mt19937 rng(9);
  const int64_t heads = 3, hd = 64, rot = 64;
  std::vector<float> inv_freq(rot / 2);
  for (int64_t i = 0; i < rot / 2; ++i) inv_freq[i] = std::pow(10000.0f, -2.0f * i / rot);
  for (auto layout : {RopeLayout::Interleaved, RopeLayout::NeoX}) {
    const auto x0 = test::random_floats(heads * hd, rng);
    for (float pos : {0.0f, 1.0f, 37.0f, 4000.0f}) {
      auto x = x0;
      rope(x.data(), heads, hd, rot, pos, inv_freq.data(), layout);
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t i = 0; i < rot / 2; ++i) {
          const int64_t a = layout == RopeLayout::Interleaved ? 2 * i : i;
          const int64_t b = layout == RopeLayout::Interleaved ? 2 * i + 1 : i + rot / 2;
          const double th = static_cast<double>(pos) * inv_freq[i];
          const double xa = x0[h * hd + a], xb = x0[h * hd + b];
          EXPECT_NEAR(x[h * hd + a], xa * std::cos(th) - xb * std::sin(th), 1e-5);
          EXPECT_NEAR(x[h * hd + b], xa * std::sin(th) + xb * std::cos(th), 1e-5);
        }
      if (pos == 0.0f) {
        for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(x[i], x0[i]);
      }
    }
  }
}

}  // namespace
}  // namespace ssd::kernels
