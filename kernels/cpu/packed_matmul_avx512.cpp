// The integer matmul on AVX-512 with VNNI: 16 rows per zmm register, vpdpbusd multiplying a
// step of 16 rows x 4 unsigned weight codes with 4 activation codes (broadcast) and adding the
// four products into each row's int32 lane, 64 multiply-adds per instruction. Q8_0's codes are
// stored biased (q + 128) so that they are unsigned too; the kernel subtracts 128 * sum(x).
// Only called after rowops.cpp checked the CPU for AVX-512 F/BW/VL/DQ and VNNI.
// (GCC 12's AVX-512 intrinsics trip its own uninitialised-use analysis; see rowops_avx512.cpp.)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "kernels/cpu/packed_matmul_impl.h"

namespace ssd::kernels::detail {
namespace {

struct V512 {
  static constexpr int kLanes = 16;
  static constexpr int kMaxTokens = 8;  // 8 accumulators + 8 code steps + scales: < 32 zmm
  static constexpr bool kQ8Biased = true;
  using F = __m512;
  using I = __m512i;
  using B = __m512i;
  using Q8 = __m512i;

  static B load_b(const uint8_t* p) { return _mm512_loadu_si512(p); }
  static B nib_lo(B v) { return _mm512_and_si512(v, _mm512_set1_epi8(0x0f)); }
  static B nib_hi(B v) { return _mm512_and_si512(_mm512_srli_epi16(v, 4), _mm512_set1_epi8(0x0f)); }
  template <int O>
  static B q6_high(B n, B h) {
    const B s = O == 0   ? _mm512_slli_epi16(h, 4)
                : O == 1 ? _mm512_slli_epi16(h, 2)
                : O == 2 ? h
                         : _mm512_srli_epi16(h, 2);
    return _mm512_ternarylogic_epi32(n, s, _mm512_set1_epi8(0x30), 0xf8);  // n | (s & 0x30)
  }
  static I bcast4(const int8_t* x) {  // the 4 codes at x in every 32-bit lane
    int32_t v;
    std::memcpy(&v, x, 4);
    return _mm512_set1_epi32(v);
  }
  static I zero_i() { return _mm512_setzero_si512(); }
  static I dot_u(I acc, B w, const int8_t* x) { return _mm512_dpbusd_epi32(acc, w, bcast4(x)); }
  static Q8 prep_q8(B b) { return b; }
  static I dot_q8(I acc, Q8 w, const int8_t* x) { return dot_u(acc, w, x); }
  static I add_i(I a, I b) { return _mm512_add_epi32(a, b); }
  static I sub_i(I a, int32_t v) { return _mm512_sub_epi32(a, _mm512_set1_epi32(v)); }

  static F zero_f() { return _mm512_setzero_ps(); }
  static F set1(float v) { return _mm512_set1_ps(v); }
  static F cvt(I v) { return _mm512_cvtepi32_ps(v); }
  static F mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F fma(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  static F fnma(F a, F b, F c) { return _mm512_fnmadd_ps(a, b, c); }
  static F load_h(const uint8_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static F load_u8(const uint8_t* p) {
    return _mm512_cvtepi32_ps(
        _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
  }
  static F load_i8(const uint8_t* p) {
    return _mm512_cvtepi32_ps(
        _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
  }
  static void store(float* p, F v) { _mm512_storeu_ps(p, v); }
};

}  // namespace

PackedKernel avx512_packed_kernel(DType t) { return packed::kernel_for<V512>(t); }

}  // namespace ssd::kernels::detail
