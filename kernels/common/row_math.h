// Per-element and per-row transformer arithmetic shared by the CUDA kernels and their CPU twins:
// RMSNorm, RoPE of one pair, SiLU / SwiGLU, the GRU cell of the Domino head, and the reduction
// order the device kernels use for row sums.
//
// Reduction order (what makes the device result reproducible and twin-testable): a row of n
// values is summed by a block of T threads as
//   partial[t] = sum over i = t, t + T, t + 2T, ... of f(i)      (in that order, per thread)
//   then a tree: for s = T/2, T/4, ..., 1: partial[t] += partial[t + s]  for t < s
// and the result is partial[0]. strided_tree_sum() below runs exactly that on the host, so the
// twin of a device row kernel gives the device's bits. The order depends on T and n only, never
// on the batch, so a row's result is the same in a 1-token decode and a K+1-token verification.
// RMSNorm accumulates in float64 like the CPU kernel (kernels/cpu/ops.cpp); the CPU sums
// sequentially, so CPU and device differ by the float64 rounding of two orders (~1e-16
// relative), which moves the float32 scale by at most one ulp.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/common/hd.h"

namespace ssd::kernels::hd {

// Threads per block of the device row kernels (RMSNorm, softmax pieces, argmax).
inline constexpr int kRowThreads = 256;

// The device's sum order over n terms with T threads (see the top of the file). T must be a
// power of two <= 1024. f(i) -> double.
template <class F>
double strided_tree_sum(int64_t n, int threads, F&& f) {
  double partial[1024];
  for (int t = 0; t < threads; ++t) {
    double acc = 0.0;
    for (int64_t i = t; i < n; i += threads) acc = dadd_rn(acc, f(i));
    partial[t] = acc;
  }
  for (int s = threads / 2; s > 0; s /= 2)
    for (int t = 0; t < s; ++t) partial[t] = dadd_rn(partial[t], partial[t + s]);
  return partial[0];
}

// 1 / rms of a row from its float64 sum of squares (as kernels::rmsnorm computes it).
SSD_HD float rms_inv_scale(double sum_sq, int64_t dim, float eps) {
  return static_cast<float>(1.0 / sqrt(sum_sq / static_cast<double>(dim) + eps));
}

// y = x * scale * g, in that order (kernels::rmsnorm: xr[i] * scale * g[i]).
SSD_HD float rmsnorm_apply(float x, float scale, float g) { return mul_rn(mul_rn(x, scale), g); }

// RoPE angle of rotation pair i at position pos, in float64 (positions reach thousands of
// radians). The CPU takes cos / sin of it in float64 and rounds to float; so does the device.
SSD_HD double rope_theta(float pos, float inv_freq) {
  return dmul_rn(static_cast<double>(pos), static_cast<double>(inv_freq));
}

// One rotation: (a, b) -> (a c - b s, a s + b c), unfused, as kernels::rope_rotate.
SSD_HD void rope_pair(float& a, float& b, float c, float s) {
  const float a0 = a, b0 = b;
  a = sub_rn(mul_rn(a0, c), mul_rn(b0, s));
  b = add_rn(mul_rn(a0, s), mul_rn(b0, c));
}

// Index of the two elements of pair i within a head: (2i, 2i+1) interleaved (GGUF Llama),
// (i, i + rot_dim/2) NeoX (HF layout).
SSD_HD void rope_pair_index(bool neox, int64_t i, int64_t rot_dim, int64_t* ia, int64_t* ib) {
  *ia = neox ? i : 2 * i;
  *ib = neox ? i + rot_dim / 2 : 2 * i + 1;
}

// exp in float: std::exp on the host (what the CPU scalar kernels call), the CUDA expf on the
// device (max 2 ulp error per the CUDA programming guide, so twin and device may differ by
// that much; tests state it).
SSD_HD float exp_f(float x) {
#if defined(__CUDA_ARCH__)
  return expf(x);
#else
  return std::exp(x);
#endif
}

SSD_HD float tanh_f(float x) {
#if defined(__CUDA_ARCH__)
  return tanhf(x);
#else
  return std::tanh(x);
#endif
}

SSD_HD float sigmoid(float x) { return 1.0f / (1.0f + exp_f(-x)); }

// silu(g) * u, written as kernels::detail::swiglu_scalar writes it: g / (1 + exp(-g)) * u.
SSD_HD float swiglu(float g, float u) { return g / (1.0f + exp_f(-g)) * u; }
SSD_HD float silu(float m) { return m / (1.0f + exp_f(-m)); }

// One unit of a PyTorch-convention GRU cell (the Domino head, runtime/drafters/domino/
// domino_head.cpp): xi_* = W_ih x + b_ih, hh_* = W_hh s + b_hh for the reset (r), update (z) and
// new (n) gates of this unit; returns the new state.
//   r = sigmoid(xi_r + hh_r); z = sigmoid(xi_z + hh_z); n = tanh(xi_n + r * hh_n)
//   s' = (1 - z) * n + z * s
SSD_HD float gru_unit(float xi_r, float xi_z, float xi_n, float hh_r, float hh_z, float hh_n,
                      float s) {
  const float r = sigmoid(xi_r + hh_r);
  const float z = sigmoid(xi_z + hh_z);
  const float nn = tanh_f(xi_n + r * hh_n);
  return (1.0f - z) * nn + z * s;
}

}  // namespace ssd::kernels::hd
