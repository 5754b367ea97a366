// F16 (IEEE binary16) and BF16 <-> float32, as SSD_HD functions: the same algorithm, step for
// step, as kernels/cpu/half.h (exact decoding of every bit pattern, round-to-nearest-even
// encoding, quiet NaNs), so a device kernel decodes a model file's scales and weights to exactly
// the floats the CPU kernels see. Integer-only, so there is nothing for the device compiler to
// contract. tests/unit/device_math/half_math_twin_test.cpp checks all 65536 patterns each way.
#pragma once

#include <cstdint>

#include "kernels/common/hd.h"

namespace ssd::kernels::hd {

SSD_HD float fp16_to_fp32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t man = h & 0x3ffu;
  if (exp == 0) {  // zero or subnormal: man * 2^-24, exact in float32
    const float mag = mul_rn(static_cast<float>(man), 0x1p-24f);
    return f32_from_bits(f32_bits(mag) | sign);
  }
  if (exp == 31) return f32_from_bits(sign | 0x7f800000u | (man << 13));  // inf / NaN
  return f32_from_bits(sign | ((exp + 112u) << 23) | (man << 13));        // rebias 15 -> 127
}

SSD_HD uint16_t fp32_to_fp16(float f) {
  const uint32_t x = f32_bits(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) {
    if (ax == 0x7f800000u) return static_cast<uint16_t>(sign | 0x7c00u);
    return static_cast<uint16_t>(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
  }
  if (ax >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);
  if (ax < 0x38800000u) {
    if (ax < 0x33000000u) return sign;
    const uint32_t e = ax >> 23;
    const uint32_t m = (ax & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126u - e;
    uint32_t q = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1u);
    const uint32_t half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (q & 1u))) ++q;
    return static_cast<uint16_t>(sign | q);
  }
  uint32_t h = (((ax >> 23) - 112u) << 10) | ((ax >> 13) & 0x3ffu);
  const uint32_t rem = ax & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

SSD_HD float bf16_to_fp32(uint16_t b) { return f32_from_bits(static_cast<uint32_t>(b) << 16); }

SSD_HD uint16_t fp32_to_bf16(float f) {
  const uint32_t x = f32_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

}  // namespace ssd::kernels::hd
