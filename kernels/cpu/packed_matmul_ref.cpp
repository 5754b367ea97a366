// matmul_q8_ref: the integer path's reference twin, one row and one token at a time, read
// straight from the file's block layouts (quant_blocks.h), not from the packed tiles: it checks
// the packing and the kernels together. The activation codes come from the same quantizer the
// kernels use (act_q8.h); each block's integer dot product is the signed sum of code products;
// the float steps are exactly those stated in packed_matmul_impl.h, in the same order, so the
// kernels must match this bit for bit.
#include <cmath>
#include <vector>

#include "kernels/cpu/act_q8.h"
#include "kernels/cpu/half.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/packed_matrix.h"
#include "kernels/cpu/quant_blocks.h"
#include "runtime/core/error.h"

namespace ssd::kernels {
namespace {

// sum_i v[i] * x[i] over `len` values, exact in int32 (|v| <= 128, |x| <= 127, len <= 32).
int32_t idot(const int* v, const int8_t* x, int len) {
  int32_t s = 0;
  for (int i = 0; i < len; ++i) s += v[i] * x[i];
  return s;
}

float row_q8(DType type, const uint8_t* row, const ActQ8& a, int64_t t) {
  float acc = 0.0f;
  int v[32];
  for (int64_t c = 0; c < a.blocks; ++c) {
    const int64_t k = a.at(t, c);
    const int8_t* x = a.codes(t, c);
    const float dx = a.d[k];
    switch (type) {
      case DType::Q4_0: {
        const auto& b = reinterpret_cast<const BlockQ4_0*>(row)[c];
        for (int i = 0; i < 16; ++i) v[i] = (b.qs[i] & 15) - 8, v[i + 16] = (b.qs[i] >> 4) - 8;
        acc = std::fma(static_cast<float>(idot(v, x, 32)), fp16_to_fp32(b.d) * dx, acc);
        break;
      }
      case DType::Q8_0: {
        const auto& b = reinterpret_cast<const BlockQ8_0*>(row)[c];
        for (int i = 0; i < 32; ++i) v[i] = b.qs[i];
        acc = std::fma(static_cast<float>(idot(v, x, 32)), fp16_to_fp32(b.d) * dx, acc);
        break;
      }
      case DType::Q4_1: {
        const auto& b = reinterpret_cast<const BlockQ4_1*>(row)[c];
        for (int i = 0; i < 16; ++i) v[i] = b.qs[i] & 15, v[i + 16] = b.qs[i] >> 4;
        acc = std::fma(static_cast<float>(idot(v, x, 32)), fp16_to_fp32(b.d) * dx, acc);
        acc = std::fma(fp16_to_fp32(b.m), a.sum[k], acc);
        break;
      }
      case DType::Q4_K: {  // chunk c is sub-block c % 8 of super-block c / 8
        const auto& b = reinterpret_cast<const BlockQ4_K*>(row)[c / 8];
        const int s = static_cast<int>(c % 8);
        for (int i = 0; i < 32; ++i) v[i] = (b.qs[32 * (s / 2) + i] >> (4 * (s % 2))) & 15;
        int sc, m;
        q4k_scale_min(b.scales, s, &sc, &m);
        const float dsc = fp16_to_fp32(b.d) * static_cast<float>(sc);   // exact
        const float dm = fp16_to_fp32(b.dmin) * static_cast<float>(m);  // exact
        acc = std::fma(static_cast<float>(idot(v, x, 32)), dsc * dx, acc);
        acc = std::fma(-dm, a.sum[k], acc);
        break;
      }
      case DType::Q6_K: {  // chunk c: values 32 (c % 8) .. + 32 of super-block c / 8
        const auto& b = reinterpret_cast<const BlockQ6_K*>(row)[c / 8];
        const int s = static_cast<int>(c % 8);
        for (int i = 0; i < 32; ++i) {
          const int e = 32 * s + i, h = e / 128, j = e % 128;
          const int lo = (b.ql[64 * h + j % 64] >> (4 * (j / 64))) & 15;
          const int hi = (b.qh[32 * h + j % 32] >> (2 * (j / 32))) & 3;
          v[i] = (lo | (hi << 4)) - 32;
        }
        const float d = fp16_to_fp32(b.d);
        const float dlo = d * static_cast<float>(b.scales[2 * s]);      // exact
        const float dhi = d * static_cast<float>(b.scales[2 * s + 1]);  // exact
        acc = std::fma(static_cast<float>(idot(v, x, 16)), dlo * dx, acc);
        acc = std::fma(static_cast<float>(idot(v + 16, x + 16, 16)), dhi * dx, acc);
        break;
      }
      default:
        SSD_ASSERT(false);
    }
  }
  return acc;
}

}  // namespace

void matmul_q8_ref(const WeightMatrix& w, const float* x, float* y, int64_t n) {
  SSD_CHECK(has_packed_kernel(w.type), "matmul_q8_ref: no integer path for type {}",
            dtype_name(w.type));
  SSD_CHECK(w.cols % dtype_traits(w.type).block_elems == 0 && n >= 0,
            "matmul_q8_ref: bad shape {} x {} for {}", w.rows, w.cols, dtype_name(w.type));
  ActQ8Buffer buffer;
  const ActQ8& a = buffer.quantize(x, n, w.cols);
  for (int64_t r = 0; r < w.rows; ++r)
    for (int64_t t = 0; t < n; ++t)
      y[t * w.rows + r] = row_q8(w.type, w.data + static_cast<uint64_t>(r) * w.row_bytes, a, t);
}

}  // namespace ssd::kernels
