// AVX2 + FMA (+F16C) float-path row kernels: rowops_simd.h with 8 floats per register, four
// registers per 32-value chunk, and two tokens' accumulators at a time (8 of the 16 ymm
// registers). Compiled with -mavx2 -mfma -mf16c and only ever called after the CPU was checked
// (rowops.cpp), so nothing here may be reachable from baseline code: every helper has internal
// linkage, and from shared headers only always_inline functions are used.
#include "kernels/cpu/rowops_simd.h"

namespace ssd::kernels::detail {
namespace {

struct V256 {
  using F = __m256;
  static constexpr int kLanes = 8, kRegs = 4, kMaxTokens = 2;
  static F set1(float v) { return _mm256_set1_ps(v); }
  static F add(F a, F b) { return _mm256_add_ps(a, b); }
  static F sub(F a, F b) { return _mm256_sub_ps(a, b); }
  static F mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static F fmadd(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
  static F fmsub(F a, F b, F c) { return _mm256_fmsub_ps(a, b, c); }
  static F loadu(const float* p) { return _mm256_loadu_ps(p); }
  static void storeu(float* p, F v) { _mm256_storeu_ps(p, v); }
  static float hsum(F v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  static void u8x32(__m256i q, F* r) {
    const __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
    r[0] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(lo));
    r[1] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_unpackhi_epi64(lo, lo)));
    r[2] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(hi));
    r[3] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_unpackhi_epi64(hi, hi)));
  }
  static void i8x32(__m256i q, F* r) {
    const __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
    r[0] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(lo));
    r[1] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_unpackhi_epi64(lo, lo)));
    r[2] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(hi));
    r[3] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_unpackhi_epi64(hi, hi)));
  }
  static void f16x32(const uint8_t* p, F* r) {
    const auto* h = reinterpret_cast<const __m128i*>(p);
    for (int k = 0; k < 4; ++k) r[k] = _mm256_cvtph_ps(_mm_loadu_si128(h + k));
  }
  static void bf16x32(const uint8_t* p, F* r) {
    const auto* h = reinterpret_cast<const __m128i*>(p);
    for (int k = 0; k < 4; ++k)
      r[k] =
          _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(h + k)), 16));
  }
};

}  // namespace

const TypeKernels* avx2_kernels(DType t) { return simd::kernels_for<V256>(t); }

}  // namespace ssd::kernels::detail
