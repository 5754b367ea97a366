// SwiGLU with AVX2 + FMA: silu(g) * u = g * u / (1 + exp(-g)), the exp from vec_math.h. The tail
// is done with masked loads and stores by the same code, so an element's result never depends on
// where it sits in the array (or on how the backend splits the array across threads).
#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/ops.h"
#include "kernels/cpu/vec_math.h"

namespace ssd::kernels::detail {

void swiglu_avx2(const float* gate, const float* up, float* out, int64_t n) {
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  for (int64_t i = 0; i < n; i += 8) {
    const int left = n - i >= 8 ? 8 : static_cast<int>(n - i);
    const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(left), lane);
    const __m256 g = _mm256_maskload_ps(gate + i, m);
    const __m256 u = _mm256_maskload_ps(up + i, m);
    const __m256 e = exp_avx2(_mm256_sub_ps(_mm256_setzero_ps(), g));
    const __m256 y = _mm256_div_ps(_mm256_mul_ps(g, u), _mm256_add_ps(one, e));
    _mm256_maskstore_ps(out + i, m, y);
  }
}

}  // namespace ssd::kernels::detail
