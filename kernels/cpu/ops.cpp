// Element-wise and per-row transformer ops. Plain loops: they are a small share of the work next
// to matmul, and the compiler vectorises the simple ones at baseline SSE2; SwiGLU dispatches to
// ops_avx2.cpp / ops_avx512.cpp (vector exp). Reductions (the RMS, the softmax sum) accumulate in
// float64 so that long rows do not lose precision.
#include "kernels/cpu/ops.h"

#include <cmath>
#include <vector>

#include "kernels/cpu/rowops.h"
#include "runtime/core/error.h"

namespace ssd::kernels {

void rmsnorm(const float* x, const float* g, float* y, int64_t rows, int64_t dim, float eps) {
  SSD_CHECK(dim > 0, "rmsnorm: dim must be positive, got {}", dim);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;  // [dim]
    float* yr = y + r * dim;        // [dim], may alias xr
    double ss = 0.0;
    for (int64_t i = 0; i < dim; ++i) ss += static_cast<double>(xr[i]) * xr[i];
    const float scale = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(dim) + eps));
    for (int64_t i = 0; i < dim; ++i) yr[i] = xr[i] * scale * g[i];
  }
}

void rope_angles(float pos, const float* inv_freq, int64_t rot_dim, float* cos, float* sin) {
  for (int64_t i = 0; i < rot_dim / 2; ++i) {
    // The angle in float64: pos * inv_freq reaches thousands of radians at long positions.
    const double theta = static_cast<double>(pos) * static_cast<double>(inv_freq[i]);
    cos[i] = static_cast<float>(std::cos(theta));
    sin[i] = static_cast<float>(std::sin(theta));
  }
}

void rope_rotate(float* x, int64_t n_heads, int64_t head_dim, int64_t rot_dim, const float* cos,
                 const float* sin, RopeLayout layout) {
  SSD_CHECK(rot_dim % 2 == 0 && rot_dim <= head_dim && rot_dim >= 0,
            "rope: rot_dim {} must be even and at most head_dim {}", rot_dim, head_dim);
  const int64_t half = rot_dim / 2;
  // Pair i of a head is (a, b): (2i, 2i+1) interleaved, (i, i + half) NeoX.
  const int64_t a_step = layout == RopeLayout::Interleaved ? 2 : 1;
  const int64_t b_off = layout == RopeLayout::Interleaved ? 1 : half;
  for (int64_t h = 0; h < n_heads; ++h) {
    float* xh = x + h * head_dim;  // x: [n_heads, head_dim]
    for (int64_t i = 0; i < half; ++i) {
      float* p = xh + i * a_step;
      const float a = p[0], b = p[b_off], c = cos[i], s = sin[i];
      p[0] = a * c - b * s;
      p[b_off] = a * s + b * c;
    }
  }
}

void rope(float* x, int64_t n_heads, int64_t head_dim, int64_t rot_dim, float pos,
          const float* inv_freq, RopeLayout layout) {
  SSD_CHECK(rot_dim % 2 == 0 && rot_dim <= head_dim && rot_dim >= 0,
            "rope: rot_dim {} must be even and at most head_dim {}", rot_dim, head_dim);
  float cos[512], sin[512];  // rot_dim <= head_dim; heads wider than 1024 take the slow path
  if (rot_dim / 2 <= 512) {
    rope_angles(pos, inv_freq, rot_dim, cos, sin);
    rope_rotate(x, n_heads, head_dim, rot_dim, cos, sin, layout);
    return;
  }
  std::vector<float> c(static_cast<size_t>(rot_dim / 2)), s(static_cast<size_t>(rot_dim / 2));
  rope_angles(pos, inv_freq, rot_dim, c.data(), s.data());
  rope_rotate(x, n_heads, head_dim, rot_dim, c.data(), s.data(), layout);
}

void softmax(float* x, int64_t n) {
  if (n <= 0) return;
  float mx = x[0];
  for (int64_t i = 1; i < n; ++i) mx = x[i] > mx ? x[i] : mx;
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - mx);
    sum += x[i];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

namespace detail {

void swiglu_scalar(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

}  // namespace detail

void swiglu(const float* gate, const float* up, float* out, int64_t n) {
  switch (active_isa()) {
    case Isa::Amx:
    case Isa::Avx512:
      return detail::swiglu_avx512(gate, up, out, n);
    case Isa::Avx2:
      return detail::swiglu_avx2(gate, up, out, n);
    case Isa::Scalar:
      break;
  }
  detail::swiglu_scalar(gate, up, out, n);
}

}  // namespace ssd::kernels
