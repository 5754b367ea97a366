// The activation quantizer, in SSE2 (part of baseline x86-64, so the same instructions, hence the
// same codes, whatever ISA the matmul kernels run on). A block of 32 values is 8 registers of 4.
//
// Rounding: q = round-half-even(x * (127 / amax)) by cvtps2dq, which rounds to nearest-even
// under the default MXCSR (nothing here changes it); |x * (127 / amax)| <= 127 (1 + 2^-23), so q
// lands in [-127, 127] and the int8 packing never saturates. The product and the conversion are
// separate instructions (no FMA contraction is possible in SSE2).
#include "kernels/cpu/act_q8.h"

#include <emmintrin.h>

#include <cmath>
#include <limits>

#include "runtime/core/error.h"

namespace ssd::kernels {
namespace {

float hmax(__m128 v) {
  v = _mm_max_ps(v, _mm_movehl_ps(v, v));
  v = _mm_max_ss(v, _mm_shuffle_ps(v, v, 1));
  return _mm_cvtss_f32(v);
}

int32_t hsum(__m128i v) {
  v = _mm_add_epi32(v, _mm_shuffle_epi32(v, _MM_SHUFFLE(1, 0, 3, 2)));
  v = _mm_add_epi32(v, _mm_shuffle_epi32(v, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(v);
}

}  // namespace

void quantize_act_block(const float* x, int8_t* q, float* d, float* sum, int32_t* qsum) {
  const __m128 abs_mask = _mm_castsi128_ps(_mm_set1_epi32(0x7fffffff));
  const __m128 big = _mm_set1_ps(std::numeric_limits<float>::max());
  __m128 v[8], amax4 = _mm_setzero_ps(), bad = _mm_setzero_ps();
  for (int k = 0; k < 8; ++k) {
    v[k] = _mm_loadu_ps(x + 4 * k);
    const __m128 a = _mm_and_ps(v[k], abs_mask);
    amax4 = _mm_max_ps(amax4, a);
    bad = _mm_or_ps(bad, _mm_cmpnle_ps(a, big));  // NaN (unordered) or inf
  }
  if (_mm_movemask_ps(bad)) {  // NaN / inf: a NaN scale carries it to every output of the token
    *d = *sum = std::numeric_limits<float>::quiet_NaN();
    for (int i = 0; i < kActBlock; ++i) q[i] = 0;
    qsum[0] = qsum[1] = 0;
    return;
  }
  const float amax = hmax(amax4);
  *d = amax / 127.0f;
  const __m128 inv = _mm_set1_ps(amax > 0.0f ? 127.0f / amax : 0.0f);
  __m128i c[8];
  for (int k = 0; k < 8; ++k) c[k] = _mm_cvtps_epi32(_mm_mul_ps(v[k], inv));
  for (int h = 0; h < 2; ++h) {  // values 16h .. 16h + 15
    const __m128i* p = c + 4 * h;
    const __m128i w16a = _mm_packs_epi32(p[0], p[1]), w16b = _mm_packs_epi32(p[2], p[3]);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 16 * h), _mm_packs_epi16(w16a, w16b));
    qsum[h] = hsum(_mm_add_epi32(_mm_add_epi32(p[0], p[1]), _mm_add_epi32(p[2], p[3])));
  }
  *sum = *d * static_cast<float>(qsum[0] + qsum[1]);
}

const ActQ8& ActQ8Buffer::quantize(const float* x, int64_t n, int64_t cols) {
  SSD_CHECK(n >= 0 && cols >= 0 && cols % kActBlock == 0,
            "quantize activations: {} x {} is not a whole number of {}-value blocks per token", n,
            cols, kActBlock);
  const int64_t blocks = cols / kActBlock;
  if (static_cast<int64_t>(q_.size()) < n * cols) q_.resize(n * cols);
  if (static_cast<int64_t>(d_.size()) < n * blocks) {
    d_.resize(n * blocks);
    sum_.resize(n * blocks);
    qsum_.resize(2 * n * blocks);
  }
  for (int64_t t = 0; t < n; ++t)
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t k = b * n + t;
      quantize_act_block(x + t * cols + b * kActBlock, q_.data() + k * kActBlock, &d_[k], &sum_[k],
                         &qsum_[2 * k]);
    }
  view_ = ActQ8{n, cols, blocks, q_.data(), d_.data(), sum_.data(), qsum_.data()};
  return view_;
}

}  // namespace ssd::kernels
