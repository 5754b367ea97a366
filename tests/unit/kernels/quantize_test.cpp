// quantize_row -> ref::dequantize_row round trips, per type, with the error bounds the reference
// quantizers guarantee (x: input, y: decoded value, per block / sub-block, stored scales):
//   F32   exact.
//   F16   |y - x| <= 2^-11 |x| + 2^-25          (half an ulp; subnormal step 2^-24)
//   BF16  |y - x| <= 2^-8 |x|
//   Q8_0  |y - x| <= d/2,   d <= up(amax/127)
//   Q4_0  |y - x| <= |d|/2 where x/d <= 7.5, else <= |d| (the -8..7 range is one-sided),
//         |d| <= up(amax/8)
//   Q4_1  |y - x| <= d/2,   d <= up((max - min + up(|min|) - |min|) / 15)
//   Q4_K  per sub-block s: |y - x| <= (d sc_s)/2, d sc_s <= (max_s - min(min_s, 0) + dmin)/15 + d,
//         dmin <= up(max_s(-min_s) / 63), d <= up(max_s((max_s - min_s + dmin)/15) / 63)
//   Q6_K  per 16 values: |y - x| <= (d sc_s)/2, d sc_s <= amax_s/31 + d, d <= up(max amax_s/31/127)
// each plus 1e-6 * amax of the block for the float arithmetic of the quantizer, where
// up(v) = v (1 + 2^-10) + 2^-24 is the most an f16 scale rounded upward can exceed v by (one
// step: relative 2^-10 for normals, absolute 2^-24 for subnormals). The scale bounds check the
// scales are no larger than needed, which is what makes the error bounds meaningful. On Gaussian
// data the RMS error relative to sigma is also bounded (a quality check that catches a degenerate
// scale search): Q8_0 0.01, Q6_K 0.03, 4-bit types 0.12.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <string_view>

#include "kernel_test_util.h"
#include "runtime/core/error.h"

namespace ssd::kernels {
namespace {

double up(double v) { return v * (1.0 + 1.0 / 1024) + std::ldexp(1.0, -24); }

struct Case {
  const char* name;
  std::vector<float> x;
};

std::vector<Case> inputs(int64_t n) {
  std::mt19937 rng(7);
  std::vector<Case> cases;
  cases.push_back({"gauss", test::random_floats(n, rng)});
  cases.push_back({"tiny", test::random_floats(n, rng, 1e-4f)});
  std::uniform_real_distribution<float> u(2.0f, 3.0f);  // all positive, offset
  std::vector<float> pos(n);
  for (auto& v : pos) v = u(rng);
  cases.push_back({"positive", pos});
  std::vector<float> neg(n);
  for (auto& v : neg) v = -u(rng);
  cases.push_back({"negative", neg});
  auto outl = test::random_floats(n, rng, 0.1f);
  for (int64_t i = 5; i < n; i += 97) outl[i] = (i % 2 ? 8.0f : -6.0f);  // sparse outliers
  cases.push_back({"outliers", outl});
  cases.push_back({"zeros", std::vector<float>(n, 0.0f)});
  return cases;
}

float amax_of(const float* x, int n) {
  float a = 0.0f;
  for (int i = 0; i < n; ++i) a = std::max(a, std::fabs(x[i]));
  return a;
}

// Asserts the bounds of one block (all its sub-blocks) against its input.
void check_block(DType t, const uint8_t* blk, const float* x, const float* y, const char* cname,
                 int64_t b) {
  auto fail = [&](int k, double bound) {
    return ::testing::Message() << dtype_name(t) << " " << cname << " block " << b << " elem " << k
                                << ": x=" << x[k] << " y=" << y[k] << " bound=" << bound;
  };
  switch (t) {
    case DType::Q8_0: {
      const float am = amax_of(x, 32);
      const double d = fp16_to_fp32(reinterpret_cast<const BlockQ8_0*>(blk)->d);
      ASSERT_LE(d, up(am / 127.0));
      for (int k = 0; k < 32; ++k) {
        const double bound = d / 2 + 1e-6 * am;
        ASSERT_LE(std::fabs(y[k] - x[k]), bound) << fail(k, bound);
      }
      break;
    }
    case DType::Q4_0: {
      const float am = amax_of(x, 32);
      const double d = fp16_to_fp32(reinterpret_cast<const BlockQ4_0*>(blk)->d);
      ASSERT_LE(std::fabs(d), up(am / 8.0));
      for (int k = 0; k < 32; ++k) {
        const bool inside = d == 0 || x[k] / d <= 7.5;
        const double bound = (inside ? std::fabs(d) / 2 : std::fabs(d)) + 1e-6 * am;
        ASSERT_LE(std::fabs(y[k] - x[k]), bound) << fail(k, bound);
      }
      break;
    }
    case DType::Q4_1: {
      const float am = amax_of(x, 32);
      const float mn = *std::min_element(x, x + 32), mx = *std::max_element(x, x + 32);
      const double d = fp16_to_fp32(reinterpret_cast<const BlockQ4_1*>(blk)->d);
      ASSERT_LE(d, up((mx - mn + up(std::fabs(mn)) - std::fabs(mn)) / 15.0));
      for (int k = 0; k < 32; ++k) {
        const double bound = d / 2 + 1e-6 * am;
        ASSERT_LE(std::fabs(y[k] - x[k]), bound) << fail(k, bound);
      }
      break;
    }
    case DType::Q4_K: {
      const auto* q = reinterpret_cast<const BlockQ4_K*>(blk);
      const double d = fp16_to_fp32(q->d), dmin = fp16_to_fp32(q->dmin);
      const float am = amax_of(x, 256);
      double max_neg = 0, max_need = 0;
      for (int s = 0; s < 8; ++s) {
        const float* xs = x + 32 * s;
        const double mn = std::min(0.0f, *std::min_element(xs, xs + 32));
        const double mx = std::max(0.0f, *std::max_element(xs, xs + 32));
        max_neg = std::max(max_neg, -mn);
        max_need = std::max(max_need, (mx - mn + dmin) / 15);
        int sc, m;
        q4k_scale_min(q->scales, s, &sc, &m);
        const double ds = d * sc;
        ASSERT_LE(ds, (mx - mn + dmin) / 15 + d + 1e-6 * am) << "sub-block " << s;
        for (int k = 0; k < 32; ++k) {
          const double bound = ds / 2 + 1e-6 * am;
          ASSERT_LE(std::fabs(y[32 * s + k] - xs[k]), bound) << fail(32 * s + k, bound);
        }
      }
      ASSERT_LE(dmin, up(max_neg / 63));
      ASSERT_LE(d, up(max_need / 63));
      break;
    }
    case DType::Q6_K: {
      const auto* q = reinterpret_cast<const BlockQ6_K*>(blk);
      const double d = fp16_to_fp32(q->d);
      const float am = amax_of(x, 256);
      double max_need = 0;
      for (int s = 0; s < 16; ++s) {
        const double need = amax_of(x + 16 * s, 16) / 31.0;
        max_need = std::max(max_need, need);
        const double ds = d * q->scales[s];
        ASSERT_LE(ds, need + d + 1e-6 * am) << "sub-block " << s;
        for (int k = 0; k < 16; ++k) {
          const double bound = ds / 2 + 1e-6 * am;
          ASSERT_LE(std::fabs(y[16 * s + k] - x[16 * s + k]), bound) << fail(16 * s + k, bound);
        }
      }
      ASSERT_LE(d, up(max_need / 127));
      break;
    }
    default:
      break;
  }
}

TEST(Quantize, RoundTripWithinDocumentedBounds) {
  const int64_t n = 256 * 5;
  for (DType t : test::kAllTypes) {
    const auto& tr = dtype_traits(t);
    for (const auto& c : inputs(n)) {
      std::vector<uint8_t> q(dtype_row_bytes(t, n));
      std::vector<float> y(n);
      quantize_row(t, c.x.data(), q.data(), n);
      ref::dequantize_row(t, q.data(), y.data(), n);
      if (tr.block_elems == 1) {
        for (int64_t i = 0; i < n; ++i) {
          const double ax = std::fabs(c.x[i]);
          const double bound = t == DType::F32   ? 0.0
                               : t == DType::F16 ? std::ldexp(ax, -11) + std::ldexp(1.0, -25)
                                                 : std::ldexp(ax, -8);
          ASSERT_LE(std::fabs(y[i] - c.x[i]), bound) << dtype_name(t) << " " << c.name << " " << i;
        }
        continue;
      }
      for (int64_t b = 0; b < n / tr.block_elems; ++b)
        ASSERT_NO_FATAL_FAILURE(check_block(t, q.data() + b * tr.block_bytes,
                                            c.x.data() + b * tr.block_elems,
                                            y.data() + b * tr.block_elems, c.name, b));
      if (std::string_view(c.name) == "zeros") {
        for (float v : y) ASSERT_EQ(v, 0.0f) << dtype_name(t);
      }
    }
  }
}

TEST(Quantize, GaussianRmsError) {
  const int64_t n = 256 * 16;
  std::mt19937 rng(11);
  const auto x = test::random_floats(n, rng);
  const std::pair<DType, double> limits[] = {{DType::Q8_0, 0.01},
                                             {DType::Q6_K, 0.03},
                                             {DType::Q4_0, 0.12},
                                             {DType::Q4_1, 0.12},
                                             {DType::Q4_K, 0.12}};
  for (auto [t, limit] : limits) {
    std::vector<uint8_t> q(dtype_row_bytes(t, n));
    std::vector<float> y(n);
    quantize_row(t, x.data(), q.data(), n);
    ref::dequantize_row(t, q.data(), y.data(), n);
    double se = 0;
    for (int64_t i = 0; i < n; ++i) se += (y[i] - x[i]) * (y[i] - x[i]);
    const double rms = std::sqrt(se / n);
    std::printf("%s rms error / sigma = %.4f\n", std::string(dtype_name(t)).c_str(), rms);
    EXPECT_LT(rms, limit) << dtype_name(t);
  }
}

TEST(Quantize, RejectsNonFiniteAndHugeValues) {
  std::vector<float> x(256, 1.0f);
  std::vector<uint8_t> q(1024);
  x[17] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_THROW(quantize_row(DType::Q4_K, x.data(), q.data(), 256), Error);
  x[17] = 1e12f;  // Q8_0 scale 1e12/127 overflows f16
  EXPECT_THROW(quantize_row(DType::Q8_0, x.data(), q.data(), 32), Error);
  EXPECT_NO_THROW(quantize_row(DType::F16, x.data(), q.data(), 32));  // F16 just saturates to inf
}

}  // namespace
}  // namespace ssd::kernels
