// AVX-512 (F/BW/VL/DQ) row kernels. Same structure and the same linkage rules as
// rowops_avx2.cpp (read its header comment): decoders turn a block into chunks of 32 floats, here
// two zmm registers of 16, and consumers dot them with up to kMaxDotTokens activation rows or
// store them. Decoded values are bit-identical to ref::dequantize_row (exact products, one
// rounding). Only called after the CPU and OS were checked for AVX-512 (rowops.cpp).
// GCC 12's AVX-512 intrinsics build "undefined" registers by self-initialisation, which its own
// uninitialised-use analysis then reports at every inlined call; silence that for this file only.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <type_traits>

#include "kernels/cpu/half.h"
#include "kernels/cpu/quant_blocks.h"
#include "kernels/cpu/rowops_table.h"

namespace ssd::kernels::detail {
namespace {

using W = __m512[2];  // one chunk: 32 decoded values, 16 per register

__m512 u8_to_ps(__m128i b) { return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(b)); }
__m512 i8_to_ps(__m128i b) { return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(b)); }

struct DecF32 {
  static constexpr int kElems = 32, kBytes = 128;
  template <class P, class E0, class E1>
  static void decode(const uint8_t* blk, P base, E0&& e0, E1&&) {
    const auto* p = reinterpret_cast<const float*>(blk);
    W w = {_mm512_loadu_ps(p), _mm512_loadu_ps(p + 16)};
    e0(base, w);
  }
  static float scalar(const uint8_t* row, int64_t i) {
    return reinterpret_cast<const float*>(row)[i];
  }
};

struct DecF16 {
  static constexpr int kElems = 32, kBytes = 64;
  template <class P, class E0, class E1>
  static void decode(const uint8_t* blk, P base, E0&& e0, E1&&) {
    const auto* p = reinterpret_cast<const __m256i*>(blk);
    W w = {_mm512_cvtph_ps(_mm256_loadu_si256(p)), _mm512_cvtph_ps(_mm256_loadu_si256(p + 1))};
    e0(base, w);
  }
  static float scalar(const uint8_t* row, int64_t i) {
    return fp16_to_fp32(reinterpret_cast<const uint16_t*>(row)[i]);
  }
};

struct DecBF16 {
  static constexpr int kElems = 32, kBytes = 64;
  template <class P, class E0, class E1>
  static void decode(const uint8_t* blk, P base, E0&& e0, E1&&) {
    const auto* p = reinterpret_cast<const __m256i*>(blk);
    W w;
    for (int k = 0; k < 2; ++k) {
      const __m512i v = _mm512_cvtepu16_epi32(_mm256_loadu_si256(p + k));
      w[k] = _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
    }
    e0(base, w);
  }
  static float scalar(const uint8_t* row, int64_t i) {
    return bf16_to_fp32(reinterpret_cast<const uint16_t*>(row)[i]);
  }
};

struct DecQ8_0 {
  static constexpr int kElems = 32, kBytes = sizeof(BlockQ8_0);
  template <class P, class E0, class E1>
  static void decode(const uint8_t* blk, P base, E0&& e0, E1&&) {
    const auto* b = reinterpret_cast<const BlockQ8_0*>(blk);
    const __m512 d = _mm512_set1_ps(_cvtsh_ss(b->d));
    const auto* q = reinterpret_cast<const __m128i*>(b->qs);
    W w = {_mm512_mul_ps(i8_to_ps(_mm_loadu_si128(q)), d),
           _mm512_mul_ps(i8_to_ps(_mm_loadu_si128(q + 1)), d)};
    e0(base, w);
  }
};

// 16 bytes -> [0,16) from the low nibbles, [16,32) from the high nibbles.
void nibbles(__m128i q, W& w) {
  const __m128i mask = _mm_set1_epi8(0x0f);
  w[0] = u8_to_ps(_mm_and_si128(q, mask));
  w[1] = u8_to_ps(_mm_and_si128(_mm_srli_epi16(q, 4), mask));
}

struct DecQ4_0 {
  static constexpr int kElems = 32, kBytes = sizeof(BlockQ4_0);
  template <class P, class E0, class E1>
  static void decode(const uint8_t* blk, P base, E0&& e0, E1&&) {
    const auto* b = reinterpret_cast<const BlockQ4_0*>(blk);
    const __m512 d = _mm512_set1_ps(_cvtsh_ss(b->d));
    const __m512 k8 = _mm512_set1_ps(8.0f);
    W w;
    nibbles(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b->qs)), w);
    // (q - 8) * d in this order (both exact) so that q = 8 with d < 0 gives -0 like the reference
    for (int k = 0; k < 2; ++k) w[k] = _mm512_mul_ps(_mm512_sub_ps(w[k], k8), d);
    e0(base, w);
  }
};

struct DecQ4_1 {
  static constexpr int kElems = 32, kBytes = sizeof(BlockQ4_1);
  template <class P, class E0, class E1>
  static void decode(const uint8_t* blk, P base, E0&& e0, E1&&) {
    const auto* b = reinterpret_cast<const BlockQ4_1*>(blk);
    const __m512 d = _mm512_set1_ps(_cvtsh_ss(b->d));
    const __m512 m = _mm512_set1_ps(_cvtsh_ss(b->m));
    W w;
    nibbles(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b->qs)), w);
    for (int k = 0; k < 2; ++k) w[k] = _mm512_fmadd_ps(w[k], d, m);  // q*d exact, one rounding
    e0(base, w);
  }
};

struct DecQ4_K {
  static constexpr int kElems = kQK_K, kBytes = sizeof(BlockQ4_K);
  template <class P, class E0, class E1>
  static void decode(const uint8_t* blk, P base, E0&& e0, E1&& e1) {
    const auto* b = reinterpret_cast<const BlockQ4_K*>(blk);
    const float d = _cvtsh_ss(b->d), dmin = _cvtsh_ss(b->dmin);
    const __m256i mask = _mm256_set1_epi8(0x0f);
    for (int p = 0; p < 4; ++p) {  // sub-blocks 2p (low nibbles) and 2p+1 (high nibbles)
      const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b->qs + 32 * p));
      for (int h = 0; h < 2; ++h) {
        int sc, mn;
        q4k_scale_min(b->scales, 2 * p + h, &sc, &mn);
        const __m512 ds = _mm512_set1_ps(d * static_cast<float>(sc));     // exact
        const __m512 dm = _mm512_set1_ps(dmin * static_cast<float>(mn));  // exact
        const __m256i q = _mm256_and_si256(h ? _mm256_srli_epi16(raw, 4) : raw, mask);
        W w = {_mm512_fmsub_ps(u8_to_ps(_mm256_castsi256_si128(q)), ds, dm),
               _mm512_fmsub_ps(u8_to_ps(_mm256_extracti128_si256(q, 1)), ds, dm)};
        if (h == 0)
          e0(base + 64 * p, w);
        else
          e1(base + 64 * p + 32, w);
      }
    }
  }
};

struct DecQ6_K {
  static constexpr int kElems = kQK_K, kBytes = sizeof(BlockQ6_K);
  template <class P, class E0, class E1>
  static void decode(const uint8_t* blk, P base, E0&& e0, E1&& e1) {
    const auto* b = reinterpret_cast<const BlockQ6_K*>(blk);
    const float d = _cvtsh_ss(b->d);
    const __m256i m4 = _mm256_set1_epi8(0x0f), m2 = _mm256_set1_epi8(0x03);
    const __m512 k32 = _mm512_set1_ps(32.0f);
    for (int h = 0; h < 2; ++h) {
      const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b->qh + 32 * h));
      for (int s = 0; s < 4; ++s) {  // 32 values at 128h + 32s, 16 per int8 scale
        const __m256i ql =
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b->ql + 64 * h + 32 * (s & 1)));
        const __m256i lo = _mm256_and_si256(_mm256_srli_epi16(ql, 4 * (s >> 1)), m4);
        const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * s), m2);
        const __m256i q = _mm256_or_si256(lo, _mm256_slli_epi16(hi, 4));  // 0..63 per byte
        const int si = 8 * h + 2 * s;
        const __m512 da = _mm512_set1_ps(d * static_cast<float>(b->scales[si]));      // exact
        const __m512 db = _mm512_set1_ps(d * static_cast<float>(b->scales[si + 1]));  // exact
        W w = {_mm512_mul_ps(_mm512_sub_ps(u8_to_ps(_mm256_castsi256_si128(q)), k32), da),
               _mm512_mul_ps(_mm512_sub_ps(u8_to_ps(_mm256_extracti128_si256(q, 1)), k32), db)};
        if ((s & 1) == 0)
          e0(base + 128 * h + 32 * s, w);
        else
          e1(base + 128 * h + 32 * s, w);
      }
    }
  }
};

// (_mm512_reduce_add_ps trips a GCC 12 -Wmaybe-uninitialized false positive.)
float hsum(__m512 v) {
  const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

template <class D>
constexpr bool kIsFloat = requires(const uint8_t* r) {
  D::scalar(r, 0);
};

template <class D>
void dequantize(const uint8_t* row, float* dst, int64_t n) {
  auto store = [](float* p, const W& w) {
    _mm512_storeu_ps(p, w[0]);
    _mm512_storeu_ps(p + 16, w[1]);
  };
  const int64_t nb = n / D::kElems;
  for (int64_t b = 0; b < nb; ++b)
    D::decode(row + b * D::kBytes, dst + b * D::kElems, store, store);
  if constexpr (kIsFloat<D>)
    for (int64_t i = nb * D::kElems; i < n; ++i) dst[i] = D::scalar(row, i);
}

// Two accumulator sets (even and odd chunks) of two registers per token: 16 of the 32 zmm
// registers at four tokens, and four independent FMA chains per token.
template <class D, int NT>
void dot_nt(const uint8_t* row, const float* x, int64_t xs, int64_t n, float* out) {
  __m512 acc[2][NT][2];
  for (auto& s : acc)
    for (auto& t : s) t[0] = t[1] = _mm512_setzero_ps();
  auto consume = [&](auto set) {
    return [&, set](const float* xp, const W& w) {
      for (int t = 0; t < NT; ++t) {
        const float* p = xp + t * xs;
        auto& a = acc[decltype(set)::value][t];
        a[0] = _mm512_fmadd_ps(w[0], _mm512_loadu_ps(p), a[0]);
        a[1] = _mm512_fmadd_ps(w[1], _mm512_loadu_ps(p + 16), a[1]);
      }
    };
  };
  auto even = consume(std::integral_constant<int, 0>{});
  auto odd = consume(std::integral_constant<int, 1>{});
  const int64_t nb = n / D::kElems;
  int64_t b = 0;
  if constexpr (D::kElems == 32) {  // one chunk per block: alternate the sets across blocks
    for (; b + 2 <= nb; b += 2) {
      D::decode(row + b * D::kBytes, x + b * 32, even, even);
      D::decode(row + (b + 1) * D::kBytes, x + (b + 1) * 32, odd, odd);
    }
  }
  for (; b < nb; ++b) D::decode(row + b * D::kBytes, x + b * D::kElems, even, odd);
  for (int t = 0; t < NT; ++t) {
    const __m512 s = _mm512_add_ps(_mm512_add_ps(acc[0][t][0], acc[0][t][1]),
                                   _mm512_add_ps(acc[1][t][0], acc[1][t][1]));
    float r = hsum(s);
    if constexpr (kIsFloat<D>)
      for (int64_t i = nb * D::kElems; i < n; ++i) r += D::scalar(row, i) * x[t * xs + i];
    out[t] = r;
  }
}

template <class D>
void dot(const uint8_t* row, const float* x, int64_t xs, int n_tok, int64_t n, float* out) {
  switch (n_tok) {
    case 1:
      return dot_nt<D, 1>(row, x, xs, n, out);
    case 2:
      return dot_nt<D, 2>(row, x, xs, n, out);
    case 3:
      return dot_nt<D, 3>(row, x, xs, n, out);
    default:
      return dot_nt<D, 4>(row, x, xs, n, out);
  }
}

template <class D>
constexpr TypeKernels kKernels{dequantize<D>, dot<D>};

}  // namespace

const TypeKernels* avx512_kernels(DType t) {
  switch (t) {
    case DType::F32:
      return &kKernels<DecF32>;
    case DType::F16:
      return &kKernels<DecF16>;
    case DType::BF16:
      return &kKernels<DecBF16>;
    case DType::Q8_0:
      return &kKernels<DecQ8_0>;
    case DType::Q4_0:
      return &kKernels<DecQ4_0>;
    case DType::Q4_1:
      return &kKernels<DecQ4_1>;
    case DType::Q4_K:
      return &kKernels<DecQ4_K>;
    case DType::Q6_K:
      return &kKernels<DecQ6_K>;
  }
  return nullptr;
}

}  // namespace ssd::kernels::detail
