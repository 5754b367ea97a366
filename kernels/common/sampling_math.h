// The sampler's and the speculative verifier's arithmetic as SSD_HD functions, so that device
// sampling draws the same tokens the CPU draws:
//   - Philox4x32-10 and the 53-bit uniform, bit for bit runtime/sampling/philox.h (integer
//     arithmetic only: 32x32 -> 64 products, xors);
//   - exp_nonpositive / relative_exp_one, bit for bit runtime/sampling/vocab_scan.cpp (a
//     degree-13 polynomial in float64 with unfused dmul_rn / dadd_rn, so the device computes the
//     same e_i for every token);
//   - order_key: the sampler's list order (logit descending, id ascending) as one uint64;
//   - inverse-CDF selection over a list in order (ssd::sample and Residual::sample);
//   - the rejection rule of runtime/spec/residual.h: accept when u * z * q(x) < m(x); after a
//     rejection m <- max(0, m - z * q).
// Sums over a list are order-dependent. The sampler's (its normaliser, top-p's running sum, the
// draw from a processed list) run in the blocked order of blocked_scan.h, which a thread block
// shares; the residual's draw in verification (inverse_cdf below) runs in list order on the
// tree's one thread, as Residual::sample does.
#pragma once

#include <cstdint>

#include "kernels/common/hd.h"

namespace ssd::kernels::hd {

struct Philox4 {
  uint32_t v[4];
};

SSD_HD Philox4 philox4x32_10(Philox4 c, uint32_t k0, uint32_t k1) {
  constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  for (int r = 0; r < 10; ++r) {
    if (r > 0) {
      k0 += kWeyl0;
      k1 += kWeyl1;
    }
    const uint64_t p0 = static_cast<uint64_t>(kMul0) * c.v[0];
    const uint64_t p1 = static_cast<uint64_t>(kMul1) * c.v[2];
    const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    c = Philox4{{hi1 ^ c.v[1] ^ k0, lo1, hi0 ^ c.v[3] ^ k1, lo0}};
  }
  return c;
}

// The uniform at (seed, stream, step, lane) in [0, 1), 53 bits: ssd::philox_uniform.
SSD_HD double philox_uniform(uint64_t seed, uint64_t stream, uint32_t step, uint32_t lane) {
  const Philox4 ctr{{lane >> 1, step, static_cast<uint32_t>(stream),
                     static_cast<uint32_t>(stream >> 32)}};
  const Philox4 b =
      philox4x32_10(ctr, static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
  const uint32_t hi = (lane & 1) ? b.v[2] : b.v[0];
  const uint32_t lo = (lane & 1) ? b.v[3] : b.v[1];
  const uint64_t bits = (static_cast<uint64_t>(hi) << 32 | lo) >> 11;
  return static_cast<double>(bits) * 0x1.0p-53;
}

// exp(x) for x in [-708, 0] (runtime/sampling/vocab_scan.cpp exp_nonpositive, same steps).
SSD_HD double exp_nonpositive(double x) {
  constexpr double kShift = 0x1.8p52;
  constexpr double kLog2e = 0x1.71547652b82fep0;
  constexpr double kLn2Hi = 0x1.62e42fee00000p-1;
  constexpr double kLn2Lo = 0x1.a39ef35793c76p-33;
  const double shifted = dadd_rn(dmul_rn(x, kLog2e), kShift);
  const double k = dsub_rn(shifted, kShift);
  const double r = dsub_rn(dsub_rn(x, dmul_rn(k, kLn2Hi)), dmul_rn(k, kLn2Lo));
  constexpr double kC[14] = {1.0 / 6227020800.0, 1.0 / 479001600.0, 1.0 / 39916800.0,
                             1.0 / 3628800.0,    1.0 / 362880.0,    1.0 / 40320.0,
                             1.0 / 5040.0,       1.0 / 720.0,       1.0 / 120.0,
                             1.0 / 24.0,         1.0 / 6.0,         0.5,
                             1.0,                1.0};
  double p = kC[0];
  for (int i = 1; i < 14; ++i) p = dadd_rn(dmul_rn(p, r), kC[i]);
  const uint64_t biased = f64_bits(shifted) - f64_bits(kShift) + 1023;
  return dmul_rn(p, f64_from_bits(biased << 52));
}

// The sampler's e_i = exp((logit - l_max) / t), 0 below exponent -708, -inf or NaN.
SSD_HD double relative_exp_one(float logit, float l_max, double t) {
  const double x = dsub_rn(static_cast<double>(logit), static_cast<double>(l_max)) / t;
  return x >= -708.0 ? exp_nonpositive(x) : 0.0;
}

// ssd::sampling_detail::order_key: ascending key = logit descending, then id ascending.
SSD_HD uint64_t order_key(float logit, int32_t id) {
  uint32_t b = f32_bits(logit + 0.0f);
  b = (b & 0x80000000u) ? ~b : (b | 0x80000000u);
  return static_cast<uint64_t>(~b) << 32 | static_cast<uint32_t>(id);
}
SSD_HD int32_t order_key_id(uint64_t key) {
  return static_cast<int32_t>(static_cast<uint32_t>(key));
}

// Inverse CDF over n weights w[0..n) in list order: the first index whose running sum exceeds
// u * total, the last index when rounding runs past the end. Residual::sample with w = masses
// (entries <= 0 skipped); ssd::sample is blocked_inverse_cdf (blocked_scan.h).
template <class W>
SSD_HD int64_t inverse_cdf(int64_t n, W&& w, double u, double total) {
  const double target = dmul_rn(u, total);
  double run = 0;
  int64_t last = -1;
  for (int64_t i = 0; i < n; ++i) {
    const double wi = w(i);
    if (wi <= 0) continue;
    run += wi;
    last = i;
    if (target < run) return i;
  }
  return last;
}

// Residual::accepts: child token x drawn from q passes when u * z * q(x) < m(x).
SSD_HD bool residual_accepts(double u, double z, double q_x, double mass_x) {
  return dmul_rn(dmul_rn(u, z), q_x) < mass_x;
}

// Residual::reject's per-entry update: the new mass of an entry after removing z * q.
SSD_HD double residual_after_reject(double mass, double z, double q) {
  const double now = dsub_rn(mass, dmul_rn(z, q));
  return now > 0.0 ? now : 0.0;
}

}  // namespace ssd::kernels::hd
