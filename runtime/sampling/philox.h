// Philox4x32-10, the counter-based RNG of Salmon et al., "Parallel Random Numbers: As Easy as
// 1, 2, 3" (SC'11), written from the published definition. A counter-based generator is a pure
// function (key, counter) -> 128 random bits, so a draw has an address instead of a position in a
// stream: the token sampled at step s of request r is the same whatever thread, rank or call order
// produced it. That is what lets target and drafter ranks agree on the uniform used for a given
// position without exchanging it, and what makes sampled runs reproducible bit for bit.
//
// Addressing used across the runtime: a draw is (seed, stream, step, lane).
//   key     = seed (64 bits, split lo/hi)
//   counter = {lane / 2, step, stream lo, stream hi}
// and lane % 2 picks which half of the 128-bit block becomes the 53-bit double. So every
// (stream, step, lane) has its own block and no two addresses share bits.
#pragma once

#include <array>
#include <cstdint>

namespace ssd {

using PhiloxCounter = std::array<uint32_t, 4>;
using PhiloxKey = std::array<uint32_t, 2>;

namespace philox_detail {

// Multipliers and Weyl key increments from the Philox paper (the 4x32 variant).
inline constexpr uint32_t kMul0 = 0xD2511F53u;
inline constexpr uint32_t kMul1 = 0xCD9E8D57u;
inline constexpr uint32_t kWeyl0 = 0x9E3779B9u;  // golden ratio
inline constexpr uint32_t kWeyl1 = 0xBB67AE85u;  // sqrt(3) - 1

constexpr void mul_hi_lo(uint32_t a, uint32_t b, uint32_t& hi, uint32_t& lo) {
  const uint64_t p = uint64_t{a} * uint64_t{b};
  hi = static_cast<uint32_t>(p >> 32);
  lo = static_cast<uint32_t>(p);
}

// One round: two 32x32->64 multiplies whose high halves are mixed with the other two words and
// the round key; the words are also permuted.
constexpr PhiloxCounter round(const PhiloxCounter& c, const PhiloxKey& k) {
  uint32_t hi0 = 0, lo0 = 0, hi1 = 0, lo1 = 0;
  mul_hi_lo(kMul0, c[0], hi0, lo0);
  mul_hi_lo(kMul1, c[2], hi1, lo1);
  return {hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0};
}

}  // namespace philox_detail

// The block function: 10 rounds, with the key advanced by the Weyl constants between rounds.
constexpr PhiloxCounter philox4x32_10(PhiloxCounter ctr, PhiloxKey key) {
  for (int r = 0; r < 10; ++r) {
    if (r > 0) {
      key[0] += philox_detail::kWeyl0;
      key[1] += philox_detail::kWeyl1;
    }
    ctr = philox_detail::round(ctr, key);
  }
  return ctr;
}

// Two 32-bit words -> a double in [0, 1) with 53 random bits (the top 53 of hi:lo), so every
// value is a multiple of 2^-53 and 1.0 is unreachable.
constexpr double u53_to_unit_double(uint32_t hi, uint32_t lo) {
  const uint64_t bits = (uint64_t{hi} << 32 | lo) >> 11;
  return static_cast<double>(bits) * 0x1.0p-53;
}

constexpr PhiloxCounter philox_block(uint64_t seed, uint64_t stream, uint32_t step, uint32_t lane) {
  const PhiloxKey key{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)};
  const PhiloxCounter ctr{lane >> 1, step, static_cast<uint32_t>(stream),
                          static_cast<uint32_t>(stream >> 32)};
  return philox4x32_10(ctr, key);
}

// The uniform draw at address (seed, stream, step, lane), in [0, 1) with 53 bits.
constexpr double philox_uniform(uint64_t seed, uint64_t stream, uint32_t step, uint32_t lane = 0) {
  const PhiloxCounter b = philox_block(seed, stream, step, lane);
  return (lane & 1) ? u53_to_unit_double(b[2], b[3]) : u53_to_unit_double(b[0], b[1]);
}

}  // namespace ssd
