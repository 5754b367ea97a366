// Element-wise and per-row kernels of the transformer: RMSNorm, RoPE (both pair layouts),
// softmax, SwiGLU. Float32 in and out; written as plain loops the compiler vectorises.
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

// In-place softmax of x[0..n) (max-subtracted).
void softmax(float* x, int64_t n);

// out[i] = silu(gate[i]) * up[i]
void swiglu(const float* gate, const float* up, float* out, int64_t n);

}  // namespace ssd::kernels
