// The integer matmul on AVX2: 8 rows per ymm register (a 16-row tile in two passes). A step of
// 8 rows x 4 unsigned codes times 4 activation codes is vpmaddubsw (pairs of u8 x s8 products to
// int16; the codes here are < 64, so no pair saturates) then vpmaddwd with ones (pairs to
// int32). Q8_0's signed codes use the sign trick instead: |w| times x with w's sign, whose pairs
// (at most 2 x 128 x 127) fit int16 too. Only called after rowops.cpp checked for AVX2 + FMA.
#include <immintrin.h>

#include "kernels/cpu/packed_matmul_impl.h"

namespace ssd::kernels::detail {
namespace {

struct V256 {
  static constexpr int kLanes = 8;
  static constexpr int kMaxTokens = 4;  // 16 ymm registers
  static constexpr bool kQ8Biased = false;
  using F = __m256;
  using I = __m256i;
  using B = __m256i;
  struct Q8 {
    __m256i abs, sign;  // |q| and q itself (for its sign)
  };

  static B load_b(const uint8_t* p) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  }
  static B nib_lo(B v) { return _mm256_and_si256(v, _mm256_set1_epi8(0x0f)); }
  static B nib_hi(B v) { return _mm256_and_si256(_mm256_srli_epi16(v, 4), _mm256_set1_epi8(0x0f)); }
  template <int O>
  static B q6_high(B n, B h) {
    const B s = O == 0   ? _mm256_slli_epi16(h, 4)
                : O == 1 ? _mm256_slli_epi16(h, 2)
                : O == 2 ? h
                         : _mm256_srli_epi16(h, 2);
    return _mm256_or_si256(n, _mm256_and_si256(s, _mm256_set1_epi8(0x30)));
  }
  static I bcast4(const int8_t* x) {  // the 4 codes at x in every 32-bit lane
    int32_t v;
    std::memcpy(&v, x, 4);
    return _mm256_set1_epi32(v);
  }
  static I zero_i() { return _mm256_setzero_si256(); }
  static I dot_u(I acc, B w, const int8_t* x) {
    const __m256i p16 = _mm256_maddubs_epi16(w, bcast4(x));
    return _mm256_add_epi32(acc, _mm256_madd_epi16(p16, _mm256_set1_epi16(1)));
  }
  static Q8 prep_q8(B b) {
    const __m256i q = _mm256_xor_si256(b, _mm256_set1_epi8(static_cast<char>(0x80)));
    return {_mm256_abs_epi8(q), q};
  }
  static I dot_q8(I acc, const Q8& w, const int8_t* x) {
    const __m256i sx = _mm256_sign_epi8(bcast4(x), w.sign);
    const __m256i p16 = _mm256_maddubs_epi16(w.abs, sx);
    return _mm256_add_epi32(acc, _mm256_madd_epi16(p16, _mm256_set1_epi16(1)));
  }
  static I add_i(I a, I b) { return _mm256_add_epi32(a, b); }
  static I sub_i(I a, int32_t v) { return _mm256_sub_epi32(a, _mm256_set1_epi32(v)); }

  static F zero_f() { return _mm256_setzero_ps(); }
  static F set1(float v) { return _mm256_set1_ps(v); }
  static F cvt(I v) { return _mm256_cvtepi32_ps(v); }
  static F mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static F fma(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
  static F fnma(F a, F b, F c) { return _mm256_fnmadd_ps(a, b, c); }
  static F load_h(const uint8_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static F load_u8(const uint8_t* p) {
    return _mm256_cvtepi32_ps(
        _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
  }
  static F load_i8(const uint8_t* p) {
    return _mm256_cvtepi32_ps(
        _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
  }
  static void store(float* p, F v) { _mm256_storeu_ps(p, v); }
};

}  // namespace

PackedKernel avx2_packed_kernel(DType t) { return packed::kernel_for<V256>(t); }

}  // namespace ssd::kernels::detail
