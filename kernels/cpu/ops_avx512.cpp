// SwiGLU with AVX-512: silu(g) * u = g * u / (1 + exp(-g)), the exp from vec_math.h. The tail is
// done with masked registers by the same code, so an element's result never depends on where it
// sits in the array (or on how the backend splits the array across threads).
// GCC 12 warns inside its own avx512fintrin.h (the _mm512_undefined_ps() placeholders of
// unmasked intrinsics) once they are inlined here: a known false positive.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/ops.h"
#include "kernels/cpu/vec_math.h"

namespace ssd::kernels::detail {

void swiglu_avx512(const float* gate, const float* up, float* out, int64_t n) {
  const __m512 one = _mm512_set1_ps(1.0f);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? static_cast<__mmask16>(0xFFFF)
                                    : static_cast<__mmask16>((1u << (n - i)) - 1u);
    const __m512 g = _mm512_maskz_loadu_ps(m, gate + i);
    const __m512 u = _mm512_maskz_loadu_ps(m, up + i);
    const __m512 e = exp_avx512(_mm512_sub_ps(_mm512_setzero_ps(), g));
    const __m512 y = _mm512_div_ps(_mm512_mul_ps(g, u), _mm512_add_ps(one, e));
    _mm512_mask_storeu_ps(out + i, m, y);
  }
}

}  // namespace ssd::kernels::detail
