// Dequantisation of one element of a GGML block, for every weight type the loaders produce
// (Q4_0, Q4_1, Q8_0, Q4_K, Q6_K, F16, BF16, F32), as SSD_HD functions. The byte layouts are
// kernels/cpu/quant_blocks.h's structs (plain data, usable on the device); the arithmetic is
// kernels/cpu/rowops_ref.cpp's, operation for operation and with mul_rn / add_rn so the device
// compiler cannot fuse q * d + m into an FMA: dequant_elem() returns bit for bit what
// kernels::ref::dequantize_row (and so every CPU kernel) produces.
//
// Element addressing: dequant_elem(type, row, i) reads value i of a row that starts at `row`
// (i < cols). One element at a time is what a device kernel wants (thread i decodes value i, or
// a warp lane decodes a strided slice); decoding a whole block at once would only save
// recomputing a block's scale, which is a load already in L1.
#pragma once

#include <cstdint>

#include "kernels/common/half_math.h"
#include "kernels/common/hd.h"
#include "kernels/cpu/quant_blocks.h"
#include "runtime/core/dtype.h"

namespace ssd::kernels::hd {

// Q4_K's 6-bit scale and min of sub-block j (kernels/cpu/quant_blocks.h q4k_scale_min).
SSD_HD void q4k_scale_min(const uint8_t* s, int j, int* sc, int* m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = (s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4);
    *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

SSD_HD float dequant_q4_0(const BlockQ4_0& b, int j) {  // j < 32
  const int q = j < 16 ? (b.qs[j] & 0x0f) : (b.qs[j - 16] >> 4);
  return mul_rn(static_cast<float>(q - 8), fp16_to_fp32(b.d));
}

SSD_HD float dequant_q4_1(const BlockQ4_1& b, int j) {
  const int q = j < 16 ? (b.qs[j] & 0x0f) : (b.qs[j - 16] >> 4);
  return add_rn(mul_rn(static_cast<float>(q), fp16_to_fp32(b.d)), fp16_to_fp32(b.m));
}

SSD_HD float dequant_q8_0(const BlockQ8_0& b, int j) {
  return mul_rn(static_cast<float>(b.qs[j]), fp16_to_fp32(b.d));
}

SSD_HD float dequant_q4_k(const BlockQ4_K& b, int e) {  // e < 256
  const int s = e / 32, k = e % 32;
  int sc = 0, m = 0;
  q4k_scale_min(b.scales, s, &sc, &m);
  const float ds = mul_rn(fp16_to_fp32(b.d), static_cast<float>(sc));
  const float dm = mul_rn(fp16_to_fp32(b.dmin), static_cast<float>(m));
  const int q = (b.qs[32 * (s / 2) + k] >> (4 * (s % 2))) & 0x0f;
  return sub_rn(mul_rn(ds, static_cast<float>(q)), dm);
}

SSD_HD float dequant_q6_k(const BlockQ6_K& b, int e) {  // e < 256
  const int h = e / 128, k = e % 128;
  const int lo = (b.ql[64 * h + k % 64] >> (4 * (k / 64))) & 0x0f;
  const int hi = (b.qh[32 * h + k % 32] >> (2 * (k / 32))) & 0x03;
  const float ds = mul_rn(fp16_to_fp32(b.d), static_cast<float>(b.scales[e / 16]));
  return mul_rn(ds, static_cast<float>((lo | (hi << 4)) - 32));
}

// Value i of a row of `type` starting at `row`.
SSD_HD float dequant_elem(DType type, const uint8_t* row, int64_t i) {
  switch (type) {
    case DType::F32:
      return reinterpret_cast<const float*>(row)[i];
    case DType::F16:
      return fp16_to_fp32(reinterpret_cast<const uint16_t*>(row)[i]);
    case DType::BF16:
      return bf16_to_fp32(reinterpret_cast<const uint16_t*>(row)[i]);
    case DType::Q4_0:
      return dequant_q4_0(reinterpret_cast<const BlockQ4_0*>(row)[i / kQK], int(i % kQK));
    case DType::Q4_1:
      return dequant_q4_1(reinterpret_cast<const BlockQ4_1*>(row)[i / kQK], int(i % kQK));
    case DType::Q8_0:
      return dequant_q8_0(reinterpret_cast<const BlockQ8_0*>(row)[i / kQK], int(i % kQK));
    case DType::Q4_K:
      return dequant_q4_k(reinterpret_cast<const BlockQ4_K*>(row)[i / kQK_K], int(i % kQK_K));
    case DType::Q6_K:
      return dequant_q6_k(reinterpret_cast<const BlockQ6_K*>(row)[i / kQK_K], int(i % kQK_K));
  }
  return 0.0f;  // unreachable for a valid DType; the host side checks types before launching
}

}  // namespace ssd::kernels::hd
