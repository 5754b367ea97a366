// AVX-512 (F/BW/VL/DQ) float-path row kernels: rowops_simd.h with 16 floats per register, two
// registers per 32-value chunk, and four tokens' accumulators (16 of the 32 zmm registers). Only
// called after the CPU and OS were checked for AVX-512 (rowops.cpp).
// GCC 12's AVX-512 intrinsics build "undefined" registers by self-initialisation, which its own
// uninitialised-use analysis then reports at every inlined call; silence that for this file only.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include "kernels/cpu/rowops_simd.h"

namespace ssd::kernels::detail {
namespace {

struct V512 {
  using F = __m512;
  static constexpr int kLanes = 16, kRegs = 2, kMaxTokens = 4;
  static F set1(float v) { return _mm512_set1_ps(v); }
  static F add(F a, F b) { return _mm512_add_ps(a, b); }
  static F sub(F a, F b) { return _mm512_sub_ps(a, b); }
  static F mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F fmadd(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  static F fmsub(F a, F b, F c) { return _mm512_fmsub_ps(a, b, c); }
  static F loadu(const float* p) { return _mm512_loadu_ps(p); }
  static void storeu(float* p, F v) { _mm512_storeu_ps(p, v); }
  // (_mm512_reduce_add_ps trips a GCC 12 -Wmaybe-uninitialized false positive.)
  static float hsum(F v) {
    const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  static void u8x32(__m256i q, F* r) {
    r[0] = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm256_castsi256_si128(q)));
    r[1] = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm256_extracti128_si256(q, 1)));
  }
  static void i8x32(__m256i q, F* r) {
    r[0] = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_castsi256_si128(q)));
    r[1] = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_extracti128_si256(q, 1)));
  }
  static void f16x32(const uint8_t* p, F* r) {
    const auto* h = reinterpret_cast<const __m256i*>(p);
    r[0] = _mm512_cvtph_ps(_mm256_loadu_si256(h));
    r[1] = _mm512_cvtph_ps(_mm256_loadu_si256(h + 1));
  }
  static void bf16x32(const uint8_t* p, F* r) {
    const auto* h = reinterpret_cast<const __m256i*>(p);
    for (int k = 0; k < 2; ++k)
      r[k] = _mm512_castsi512_ps(
          _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(h + k)), 16));
  }
};

}  // namespace

const TypeKernels* avx512_kernels(DType t) { return simd::kernels_for<V512>(t); }

}  // namespace ssd::kernels::detail
