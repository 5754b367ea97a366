// Scalar conversions between float32 and the two 16-bit float formats of model files: IEEE
// binary16 (F16, also the scale field of every quantized block) and bfloat16 (BF16).
//
// Decoding is exact for every bit pattern (subnormals, infinities, NaN payloads). Encoding rounds
// to nearest, ties to even, like the hardware converters, so a value written by a test model
// writer reads back as the float closest to what it asked for.
//
// The functions are always_inline on purpose: this header is also included by the files compiled
// with -mavx2/-mavx512 flags, and an out-of-line inline function emitted there could be the copy
// the linker keeps for the whole program, putting AVX instructions on the baseline path.
#pragma once

#include <cstdint>
#include <cstring>

namespace ssd::kernels {

#define SSD_HALF_INLINE [[gnu::always_inline]] inline

SSD_HALF_INLINE uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

SSD_HALF_INLINE float float_from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

SSD_HALF_INLINE float fp16_to_fp32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t man = h & 0x3ffu;
  if (exp == 0) {
    // Zero or subnormal: man * 2^-24, exact in float32 (at most 10 significant bits).
    const float mag = static_cast<float>(man) * 0x1p-24f;
    return float_from_bits(float_bits(mag) | sign);
  }
  if (exp == 31) return float_from_bits(sign | 0x7f800000u | (man << 13));  // inf / NaN
  return float_from_bits(sign | ((exp + 112u) << 23) | (man << 13));        // rebias 15 -> 127
}

SSD_HALF_INLINE uint16_t fp32_to_fp16(float f) {
  const uint32_t x = float_bits(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) {  // inf stays inf; NaN stays NaN (quiet, top payload bits kept)
    if (ax == 0x7f800000u) return sign | 0x7c00u;
    return static_cast<uint16_t>(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
  }
  if (ax >= 0x477ff000u) return sign | 0x7c00u;  // >= 65520 rounds to infinity
  if (ax < 0x38800000u) {                        // below 2^-14: an F16 subnormal (or zero)
    if (ax < 0x33000000u) return sign;           // < 2^-25 rounds to zero (2^-25 ties to 0)
    const uint32_t e = ax >> 23;                 // biased exponent, 102..112
    const uint32_t m = (ax & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126u - e;  // value = m * 2^(e-150) = (m >> shift) units of 2^-24
    uint32_t q = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1u);
    const uint32_t half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (q & 1u))) ++q;  // may carry into the smallest normal
    return static_cast<uint16_t>(sign | q);
  }
  uint32_t h = (((ax >> 23) - 112u) << 10) | ((ax >> 13) & 0x3ffu);
  const uint32_t rem = ax & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // a carry bumps the exponent
  return static_cast<uint16_t>(sign | h);
}

SSD_HALF_INLINE float bf16_to_fp32(uint16_t b) {
  return float_from_bits(static_cast<uint32_t>(b) << 16);
}

SSD_HALF_INLINE uint16_t fp32_to_bf16(float f) {
  const uint32_t x = float_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // quiet
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);  // ties to even
}

#undef SSD_HALF_INLINE

}  // namespace ssd::kernels
