// Element-wise and per-row kernels of the transformer: RMSNorm, RoPE (both pair layouts),
// softmax, SwiGLU. Float32 in and out. SwiGLU (an exp per element, ~46k per decoded token of the
// default model) has AVX2 / AVX-512 versions chosen at run time; the others are plain loops.
// Each element's result is independent of the array length and of where the element sits, so
// the backend may split any of these across threads without changing a bit.
#pragma once

#include <cstdint>

namespace ssd::kernels {

// y[r, :] = x[r, :] / rms(x[r, :]) * g   for r < rows.   x, y: [rows, dim]; g: [dim]. y may be x.
void rmsnorm(const float* x, const float* g, float* y, int64_t rows, int64_t dim, float eps);

// Rotary embedding in place on x: [n_heads, head_dim] for one token at rotation angles
// theta_i = pos * inv_freq[i], i < rot_dim/2. Interleaved rotates pairs (2i, 2i+1) (GGUF Llama,
// whose Q/K weights were permuted by the converter); NeoX rotates (i, i + rot_dim/2) (HF layout).
enum class RopeLayout { Interleaved, NeoX };
void rope(float* x, int64_t n_heads, int64_t head_dim, int64_t rot_dim, float pos,
          const float* inv_freq, RopeLayout layout);
// The two halves of rope(), for callers that reuse the angles (every layer, Q and K, rotates by
// the same angles at a position): cos[i], sin[i] of pos * inv_freq[i] for i < rot_dim / 2
// (computed in float64, rounded to float), then the rotation with them. rope() is exactly
// rope_angles() followed by rope_rotate().
void rope_angles(float pos, const float* inv_freq, int64_t rot_dim, float* cos, float* sin);
void rope_rotate(float* x, int64_t n_heads, int64_t head_dim, int64_t rot_dim, const float* cos,
                 const float* sin, RopeLayout layout);

// In-place softmax of x[0..n) (max-subtracted).
void softmax(float* x, int64_t n);

// out[i] = silu(gate[i]) * up[i]   (out may be gate or up)
void swiglu(const float* gate, const float* up, float* out, int64_t n);

namespace detail {
void swiglu_scalar(const float* gate, const float* up, float* out, int64_t n);
void swiglu_avx2(const float* gate, const float* up, float* out, int64_t n);
void swiglu_avx512(const float* gate, const float* up, float* out, int64_t n);
}  // namespace detail

}  // namespace ssd::kernels
