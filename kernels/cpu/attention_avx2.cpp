// The attention kernel with AVX2 + FMA (8 floats per register); the algorithm is
// attention_simd.h.
#include <immintrin.h>

#include "kernels/cpu/attention_simd.h"
#include "kernels/cpu/vec_math.h"

namespace ssd::kernels::detail {
namespace {

struct Avx2 {
  using reg = __m256;
  static constexpr int width = 8;
  static constexpr int dot_slots = 2;  // 8 accumulators + 4 K rows + q of 16 registers
  static constexpr int pair_regs = 2;   // V sums of two slots: 8 accumulators of 16 registers
  // Lane i is selected when i < n (the sign bit of each 32-bit mask lane).
  static __m256i mask(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static reg zero() { return _mm256_setzero_ps(); }
  static reg set1(float x) { return _mm256_set1_ps(x); }
  static reg load(const float* p) { return _mm256_loadu_ps(p); }
  static reg load_n(const float* p, int n) { return _mm256_maskload_ps(p, mask(n)); }
  static void store(float* p, reg v) { _mm256_storeu_ps(p, v); }
  static void store_n(float* p, reg v, int n) { _mm256_maskstore_ps(p, mask(n), v); }
  static reg lanes_below(reg v, int n) { return _mm256_and_ps(v, _mm256_castsi256_ps(mask(n))); }
  static reg fmadd(reg a, reg b, reg c) { return _mm256_fmadd_ps(a, b, c); }
  static reg add(reg a, reg b) { return _mm256_add_ps(a, b); }
  static reg sub(reg a, reg b) { return _mm256_sub_ps(a, b); }
  static reg mul(reg a, reg b) { return _mm256_mul_ps(a, b); }
  static reg max(reg a, reg b) { return _mm256_max_ps(a, b); }
  static float reduce_add(reg v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  static float reduce_max(reg v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  // out[j] = sum of the lanes of a_j: pairs, then quads, then the two 128-bit halves; every
  // slot j gets the same adding order.
  static void reduce4(reg a, reg b, reg c, reg d, float* out) {
    const __m256 ab = _mm256_hadd_ps(a, b), cd = _mm256_hadd_ps(c, d);
    const __m256 abcd = _mm256_hadd_ps(ab, cd);
    _mm_storeu_ps(out, _mm_add_ps(_mm256_castps256_ps128(abcd), _mm256_extractf128_ps(abcd, 1)));
  }
  static reg exp(reg v) { return exp_avx2(v); }
};

}  // namespace

void attention_heads_avx2(const float* const* q, float* const* out, int G, const KvRows& kv,
                          int64_t head_dim, float scale, float* scratch) {
  attention_heads_simd<Avx2>(q, out, G, kv, head_dim, scale, scratch);
}

void attention_slots_avx2(const float* const* q, float* const* out, const int64_t* totals,
                          int S, const KvRows& kv, int64_t head_dim, float scale,
                          float* scratch) {
  attention_slots_simd<Avx2>(q, out, totals, S, kv, head_dim, scale, scratch);
}

}  // namespace ssd::kernels::detail
