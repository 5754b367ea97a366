// Byte layouts of the GGML block-quantized types, as stored in GGUF files. Every kernel that
// reads or writes a quantized row goes through these structs, so the layouts live in one place.
// Scales are IEEE binary16 bit patterns (see half.h); all multi-byte fields are little-endian.
//
// Element order inside a block (the part that is easy to get wrong):
//   Q4_0 / Q4_1  element j (< 16) is the low nibble of qs[j], element j + 16 its high nibble.
//   Q8_0         element j is qs[j].
//   Q4_K         256 values = 8 sub-blocks of 32. Sub-block 2k uses the low nibbles of
//                qs[32k .. 32k+32), sub-block 2k+1 the high nibbles of the same bytes.
//                value = d * sc[s] * q - dmin * m[s], with 6-bit sc, m packed in `scales`.
//   Q6_K         256 values = 2 halves of 128; in half h, element i < 128 takes 4 low bits from
//                ql[64h + i % 64] (low nibble if i < 64, else high), and 2 high bits from
//                qh[32h + i % 32] at bit 2 * (i / 32).
//                value = d * scales[(128h + i) / 16] * (q - 32).
#pragma once

#include <cstdint>

namespace ssd::kernels {

constexpr int kQK = 32;     // values per Q4_0 / Q4_1 / Q8_0 block
constexpr int kQK_K = 256;  // values per K-quant super-block

struct BlockQ4_0 {
  uint16_t d;      // f16 scale
  uint8_t qs[16];  // 32 x 4-bit, value = (q - 8) * d
};

struct BlockQ4_1 {
  uint16_t d;      // f16 scale
  uint16_t m;      // f16 offset (the block minimum)
  uint8_t qs[16];  // 32 x 4-bit, value = q * d + m
};

struct BlockQ8_0 {
  uint16_t d;     // f16 scale
  int8_t qs[32];  // value = q * d
};

struct BlockQ4_K {
  uint16_t d;          // f16 scale of the sub-block scales
  uint16_t dmin;       // f16 scale of the sub-block mins
  uint8_t scales[12];  // 8 x (6-bit scale, 6-bit min), packed as q4k_scale_min() unpacks
  uint8_t qs[128];     // 256 x 4-bit
};

struct BlockQ6_K {
  uint8_t ql[128];    // low 4 bits of the 256 quants
  uint8_t qh[64];     // high 2 bits
  int8_t scales[16];  // one per 16 values
  uint16_t d;         // f16 super-block scale
};

static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ6_K) == 210);

// Q4_K packs eight 6-bit scales and eight 6-bit mins in 12 bytes: bytes 0-3 hold scales 0-3 in
// their low 6 bits, bytes 4-7 mins 0-3; sub-blocks 4-7 keep their low 4 bits in bytes 8-11
// (scale in the low nibble, min in the high one) and their top 2 bits in the spare top bits of
// bytes 0-3 (scales) and 4-7 (mins). always_inline: see half.h for why.
[[gnu::always_inline]] inline void q4k_scale_min(const uint8_t* s, int j, int* sc, int* m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = (s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4);
    *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// Inverse of q4k_scale_min for all eight sub-blocks (values must be < 64).
inline void q4k_pack_scale_min(const int* sc, const int* m, uint8_t* s) {
  for (int j = 0; j < 4; ++j) {
    s[j] = static_cast<uint8_t>((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
    s[j + 4] = static_cast<uint8_t>((m[j] & 63) | ((m[j + 4] >> 4) << 6));
    s[j + 8] = static_cast<uint8_t>((sc[j + 4] & 0x0f) | ((m[j + 4] & 0x0f) << 4));
  }
}

}  // namespace ssd::kernels
