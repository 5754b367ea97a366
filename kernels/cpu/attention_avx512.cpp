// The attention kernel with AVX-512 (16 floats per register); the algorithm is attention_simd.h.
// GCC 12 warns inside its own avx512fintrin.h (the _mm512_undefined_ps() placeholders of
// unmasked intrinsics) once they are inlined here: a known false positive.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "kernels/cpu/attention_simd.h"
#include "kernels/cpu/vec_math.h"

namespace ssd::kernels::detail {
namespace {

struct Avx512 {
  using reg = __m512;
  static constexpr int width = 16;
  static constexpr int dot_slots = 4;  // 16 accumulators + 4 K rows + q of 32 registers
  static constexpr int pair_regs = 4;   // V sums of two slots: 16 accumulators of 32 registers
  static __mmask16 mask(int n) { return static_cast<__mmask16>((1u << n) - 1u); }
  static reg zero() { return _mm512_setzero_ps(); }
  static reg set1(float x) { return _mm512_set1_ps(x); }
  static reg load(const float* p) { return _mm512_loadu_ps(p); }
  static reg load_n(const float* p, int n) { return _mm512_maskz_loadu_ps(mask(n), p); }
  static void store(float* p, reg v) { _mm512_storeu_ps(p, v); }
  static void store_n(float* p, reg v, int n) { _mm512_mask_storeu_ps(p, mask(n), v); }
  static reg lanes_below(reg v, int n) { return _mm512_maskz_mov_ps(mask(n), v); }
  static reg fmadd(reg a, reg b, reg c) { return _mm512_fmadd_ps(a, b, c); }
  static reg add(reg a, reg b) { return _mm512_add_ps(a, b); }
  static reg sub(reg a, reg b) { return _mm512_sub_ps(a, b); }
  static reg mul(reg a, reg b) { return _mm512_mul_ps(a, b); }
  static reg max(reg a, reg b) { return _mm512_max_ps(a, b); }
  static float reduce_add(reg v) { return _mm512_reduce_add_ps(v); }
  static float reduce_max(reg v) { return _mm512_reduce_max_ps(v); }
  // out[j] = sum of the lanes of a_j: the two 256-bit halves first, then as in AVX2 (pairs,
  // quads, 128-bit halves); every slot j gets the same adding order.
  static void reduce4(reg a, reg b, reg c, reg d, float* out) {
    auto fold = [](reg x) {
      return _mm256_add_ps(_mm512_castps512_ps256(x), _mm512_extractf32x8_ps(x, 1));
    };
    const __m256 ab = _mm256_hadd_ps(fold(a), fold(b)), cd = _mm256_hadd_ps(fold(c), fold(d));
    const __m256 abcd = _mm256_hadd_ps(ab, cd);
    _mm_storeu_ps(out, _mm_add_ps(_mm256_castps256_ps128(abcd), _mm256_extractf128_ps(abcd, 1)));
  }
  static reg exp(reg v) { return exp_avx512(v); }
};

}  // namespace

void attention_heads_avx512(const float* const* q, float* const* out, int G, const KvRows& kv,
                            int64_t head_dim, float scale, float* scratch) {
  attention_heads_simd<Avx512>(q, out, G, kv, head_dim, scale, scratch);
}

void attention_slots_avx512(const float* const* q, float* const* out, const int64_t* totals,
                          int S, const KvRows& kv, int64_t head_dim, float scale,
                          float* scratch) {
  attention_slots_simd<Avx512>(q, out, totals, S, kv, head_dim, scale, scratch);
}

}  // namespace ssd::kernels::detail
