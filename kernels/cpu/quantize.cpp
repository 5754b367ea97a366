// Reference quantizers: float32 -> every weight type. Used by the test model writers (tiny
// models in every type) and by tools, never on the inference path, so they are scalar and aim
// for exact formats and bounded error rather than speed.
//
// Every quant is computed against the scale as *stored* (already rounded to f16), not the float
// scale it came from, and the f16 scales (and Q4_1's minimum) are rounded outward, the 6-bit
// (Q4_K) / 8-bit (Q6_K) sub-block scales taken as ceilings: every block's range then covers its
// inputs, nothing is clipped, and each value lands within half a step of its input. The formats
// are GGML's; the scale choice differs slightly from GGML's own quantizers (which round the
// scales to nearest and search the K-quant scales), so the bytes may differ, not the meaning.
// Error bounds per type are stated (and checked) in tests/unit/kernels/quantize_test.cpp.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/half.h"
#include "kernels/cpu/quant_blocks.h"
#include "kernels/cpu/rowops.h"
#include "runtime/core/error.h"

namespace ssd::kernels {
namespace {

// The f16 nearest to v in the direction `up` (toward +inf) or down: a scale rounded this way
// keeps every input inside the range the block can represent, so no value is clipped.
uint16_t fp16_directed(float v, bool up, DType t) {
  uint16_t h = fp32_to_fp16(v);
  const float f = fp16_to_fp32(h);
  if (up ? f < v : f > v) {
    const bool neg = (h & 0x8000u) != 0;
    if ((h & 0x7fffu) == 0)
      h = up ? 0x0001u : 0x8001u;  // step off zero (either sign)
    else if (up != neg)
      ++h;  // larger magnitude
    else
      --h;  // smaller magnitude
  }
  SSD_CHECK((h & 0x7c00u) != 0x7c00u, "quantize_row: {} scale {} does not fit in f16",
            dtype_name(t), v);
  return h;
}

uint16_t fp16_ceil(float v, DType t) { return fp16_directed(v, true, t); }

int round_clamp(float v, int lo, int hi) {
  const float r = std::round(v);  // nearest, ties away from zero
  return r < lo ? lo : r > hi ? hi : static_cast<int>(r);
}

void q8_0(const float* x, BlockQ8_0* b) {
  float amax = 0.0f;
  for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[j]));
  b->d = fp16_ceil(amax / 127.0f, DType::Q8_0);
  const float d = fp16_to_fp32(b->d);
  for (int j = 0; j < kQK; ++j)
    b->qs[j] = static_cast<int8_t>(d > 0.0f ? round_clamp(x[j] / d, -127, 127) : 0);
}

// GGML's Q4_0 scheme: the value of largest magnitude maps to q = 0 (-8 d), so the block uses the
// full -8..7 range on that side.
void q4_0(const float* x, BlockQ4_0* b) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < kQK; ++j)
    if (std::fabs(x[j]) > amax) amax = std::fabs(x[j]), max = x[j];
  b->d = fp16_directed(max / -8.0f, max < 0.0f, DType::Q4_0);  // |d| rounded up
  const float d = fp16_to_fp32(b->d);
  uint8_t q[kQK];
  for (int j = 0; j < kQK; ++j)
    q[j] = static_cast<uint8_t>(d != 0.0f ? round_clamp(x[j] / d + 8.0f, 0, 15) : 8);
  for (int j = 0; j < 16; ++j) b->qs[j] = static_cast<uint8_t>(q[j] | (q[j + 16] << 4));
}

void q4_1(const float* x, BlockQ4_1* b) {
  float mn = x[0], mx = x[0];
  for (int j = 1; j < kQK; ++j) mn = std::min(mn, x[j]), mx = std::max(mx, x[j]);
  b->m = fp16_directed(mn, false, DType::Q4_1);  // m <= min
  const float m = fp16_to_fp32(b->m);
  b->d = fp16_ceil((mx - m) / 15.0f, DType::Q4_1);  // m + 15 d >= max
  const float d = fp16_to_fp32(b->d);
  uint8_t q[kQK];
  for (int j = 0; j < kQK; ++j)
    q[j] = static_cast<uint8_t>(d > 0.0f ? round_clamp((x[j] - m) / d, 0, 15) : 0);
  for (int j = 0; j < 16; ++j) b->qs[j] = static_cast<uint8_t>(q[j] | (q[j + 16] << 4));
}

int ceil_clamp(float v, int hi) {
  const float c = std::ceil(v);
  return c > hi ? hi : static_cast<int>(c);
}

// Each sub-block s covers [-dmin*m[s], -dmin*m[s] + 15*d*sc[s]]: first the mins (m[s]*dmin >=
// -min(x_s, 0)), then the scales large enough to reach the sub-block maximum from there.
void q4_k(const float* x, BlockQ4_K* b) {
  float neg_min[8], top[8], max_neg = 0.0f;
  for (int s = 0; s < 8; ++s) {
    float mn = 0.0f, mx = 0.0f;  // mn <= 0 so that the stored min is non-negative
    for (int k = 0; k < 32; ++k) mn = std::min(mn, x[32 * s + k]), mx = std::max(mx, x[32 * s + k]);
    neg_min[s] = -mn;
    top[s] = mx;
    max_neg = std::max(max_neg, -mn);
  }
  b->dmin = fp16_ceil(max_neg / 63.0f, DType::Q4_K);
  const float dmin = fp16_to_fp32(b->dmin);
  int m[8], sc[8];
  float need[8], max_need = 0.0f;
  for (int s = 0; s < 8; ++s) {
    m[s] = dmin > 0.0f ? ceil_clamp(neg_min[s] / dmin, 63) : 0;
    need[s] = (top[s] + dmin * static_cast<float>(m[s])) / 15.0f;
    max_need = std::max(max_need, need[s]);
  }
  b->d = fp16_ceil(max_need / 63.0f, DType::Q4_K);
  const float d = fp16_to_fp32(b->d);
  for (int s = 0; s < 8; ++s) sc[s] = d > 0.0f ? ceil_clamp(need[s] / d, 63) : 0;
  q4k_pack_scale_min(sc, m, b->scales);
  std::memset(b->qs, 0, sizeof b->qs);
  for (int s = 0; s < 8; ++s) {
    const float ds = d * static_cast<float>(sc[s]), dm = dmin * static_cast<float>(m[s]);
    for (int k = 0; k < 32; ++k) {
      const int q = ds > 0.0f ? round_clamp((x[32 * s + k] + dm) / ds, 0, 15) : 0;
      b->qs[32 * (s / 2) + k] |= static_cast<uint8_t>(q << (4 * (s % 2)));
    }
  }
}

// Symmetric per 16 values: q in [-31, 31] (the format allows -32, unused here).
void q6_k(const float* x, BlockQ6_K* b) {
  float need[16], max_need = 0.0f;
  for (int s = 0; s < 16; ++s) {
    float amax = 0.0f;
    for (int k = 0; k < 16; ++k) amax = std::max(amax, std::fabs(x[16 * s + k]));
    need[s] = amax / 31.0f;
    max_need = std::max(max_need, need[s]);
  }
  b->d = fp16_ceil(max_need / 127.0f, DType::Q6_K);
  const float d = fp16_to_fp32(b->d);
  std::memset(b->ql, 0, sizeof b->ql);
  std::memset(b->qh, 0, sizeof b->qh);
  for (int s = 0; s < 16; ++s) {
    const int sc = d > 0.0f ? ceil_clamp(need[s] / d, 127) : 0;
    b->scales[s] = static_cast<int8_t>(sc);
    const float ds = d * static_cast<float>(sc);
    for (int k = 0; k < 16; ++k) {
      const int e = 16 * s + k;
      const int q = (ds > 0.0f ? round_clamp(x[e] / ds, -32, 31) : 0) + 32;  // 0..63
      const int h = e / 128, i = e % 128;
      b->ql[64 * h + i % 64] |= static_cast<uint8_t>((q & 0x0f) << (4 * (i / 64)));
      b->qh[32 * h + i % 32] |= static_cast<uint8_t>((q >> 4) << (2 * (i / 32)));
    }
  }
}

template <class Block, int N>
void per_block(const float* src, void* dst, int64_t n, void (*fn)(const float*, Block*)) {
  auto* b = static_cast<Block*>(dst);
  for (int64_t i = 0; i < n / N; ++i) fn(src + i * N, b + i);
}

}  // namespace

void quantize_row(DType t, const float* src, void* dst, int64_t n) {
  const auto& tr = dtype_traits(t);
  SSD_CHECK(n >= 0 && n % tr.block_elems == 0,
            "quantize_row: {} values is not a whole number of {} blocks ({} values each)", n,
            tr.name, tr.block_elems);
  if (dtype_is_quantized(t))
    for (int64_t i = 0; i < n; ++i)
      SSD_CHECK(std::isfinite(src[i]), "quantize_row: value {} at index {} cannot be stored as {}",
                src[i], i, tr.name);
  switch (t) {
    case DType::F32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case DType::F16: {
      auto* d = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = fp32_to_fp16(src[i]);
      return;
    }
    case DType::BF16: {
      auto* d = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = fp32_to_bf16(src[i]);
      return;
    }
    case DType::Q8_0:
      return per_block<BlockQ8_0, kQK>(src, dst, n, q8_0);
    case DType::Q4_0:
      return per_block<BlockQ4_0, kQK>(src, dst, n, q4_0);
    case DType::Q4_1:
      return per_block<BlockQ4_1, kQK>(src, dst, n, q4_1);
    case DType::Q4_K:
      return per_block<BlockQ4_K, kQK_K>(src, dst, n, q4_k);
    case DType::Q6_K:
      return per_block<BlockQ6_K, kQK_K>(src, dst, n, q6_k);
  }
  fail(fmt::format("quantize_row: unsupported type {}", tr.name));
}

}  // namespace ssd::kernels
