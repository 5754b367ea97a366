// Scalar reference decoders (namespace ref): the executable statement of each format, written
// one element at a time straight from the layouts in quant_blocks.h, with no attempt at speed.
// Every dispatched kernel is tested against these, and these are tested against the PyPI gguf
// package's dequantizers. ref::dot_row accumulates in float64 so that its own rounding error is
// negligible next to the float32 kernels it judges.
#include <vector>

#include "kernels/cpu/half.h"
#include "kernels/cpu/quant_blocks.h"
#include "kernels/cpu/rowops.h"
#include "runtime/core/error.h"

namespace ssd::kernels::ref {
namespace {

void dequant_q4_0(const BlockQ4_0* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = fp16_to_fp32(b[i].d);
    for (int j = 0; j < 16; ++j) {
      y[j] = static_cast<float>((b[i].qs[j] & 0x0f) - 8) * d;
      y[j + 16] = static_cast<float>((b[i].qs[j] >> 4) - 8) * d;
    }
  }
}

void dequant_q4_1(const BlockQ4_1* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = fp16_to_fp32(b[i].d);
    const float m = fp16_to_fp32(b[i].m);
    for (int j = 0; j < 16; ++j) {
      y[j] = static_cast<float>(b[i].qs[j] & 0x0f) * d + m;
      y[j + 16] = static_cast<float>(b[i].qs[j] >> 4) * d + m;
    }
  }
}

void dequant_q8_0(const BlockQ8_0* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = fp16_to_fp32(b[i].d);
    for (int j = 0; j < kQK; ++j) y[j] = static_cast<float>(b[i].qs[j]) * d;
  }
}

void dequant_q4_k(const BlockQ4_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK_K) {
    const float d = fp16_to_fp32(b[i].d);
    const float dmin = fp16_to_fp32(b[i].dmin);
    for (int s = 0; s < 8; ++s) {
      int sc, m;
      q4k_scale_min(b[i].scales, s, &sc, &m);
      const float ds = d * static_cast<float>(sc);
      const float dm = dmin * static_cast<float>(m);
      const uint8_t* q = b[i].qs + 32 * (s / 2);
      const int shift = 4 * (s % 2);
      for (int k = 0; k < 32; ++k)
        y[32 * s + k] = ds * static_cast<float>((q[k] >> shift) & 0x0f) - dm;
    }
  }
}

void dequant_q6_k(const BlockQ6_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK_K) {
    const float d = fp16_to_fp32(b[i].d);
    for (int e = 0; e < kQK_K; ++e) {
      const int h = e / 128, k = e % 128;
      const int lo = (b[i].ql[64 * h + k % 64] >> (4 * (k / 64))) & 0x0f;
      const int hi = (b[i].qh[32 * h + k % 32] >> (2 * (k / 32))) & 0x03;
      const float ds = d * static_cast<float>(b[i].scales[e / 16]);
      y[e] = ds * static_cast<float>((lo | (hi << 4)) - 32);
    }
  }
}

}  // namespace

void dequantize_row(DType t, const void* src, float* dst, int64_t n) {
  const auto& tr = dtype_traits(t);
  SSD_CHECK(n % tr.block_elems == 0,
            "dequantize_row: {} values is not a multiple of the {} block ({})", n, tr.name,
            tr.block_elems);
  const int64_t nb = n / tr.block_elems;
  switch (t) {
    case DType::F32: {
      const auto* s = static_cast<const float*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = s[i];
      return;
    }
    case DType::F16: {
      const auto* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_fp32(s[i]);
      return;
    }
    case DType::BF16: {
      const auto* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_fp32(s[i]);
      return;
    }
    case DType::Q4_0:
      return dequant_q4_0(static_cast<const BlockQ4_0*>(src), dst, nb);
    case DType::Q4_1:
      return dequant_q4_1(static_cast<const BlockQ4_1*>(src), dst, nb);
    case DType::Q8_0:
      return dequant_q8_0(static_cast<const BlockQ8_0*>(src), dst, nb);
    case DType::Q4_K:
      return dequant_q4_k(static_cast<const BlockQ4_K*>(src), dst, nb);
    case DType::Q6_K:
      return dequant_q6_k(static_cast<const BlockQ6_K*>(src), dst, nb);
  }
  fail(fmt::format("dequantize_row: unsupported type {}", tr.name));
}

double dot_row(DType t, const void* row, const float* x, int64_t n) {
  std::vector<float> w(static_cast<size_t>(n));
  dequantize_row(t, row, w.data(), n);
  double acc = 0.0;
  for (int64_t i = 0; i < n; ++i) acc += static_cast<double>(w[i]) * static_cast<double>(x[i]);
  return acc;
}

}  // namespace ssd::kernels::ref
