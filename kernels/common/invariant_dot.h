// The batch-invariant dot product, one warp per output, as functions the CUDA kernels
// (kernels/cuda/matmul.cu, domino_walk.cu) and their CPU twins share. Lane l of 32 accumulates
// c = l, l + 32, ... in increasing order with fused multiply-adds; then an xor butterfly
// combines the lanes (step o = 16, 8, 4, 2, 1: every lane adds lane l ^ o's partial), as
// __shfl_xor_sync does. The order depends only on the length, so a token's outputs are the same
// bits whatever the batch: what greedy speculative decoding needs from the target (a K+1-token
// verification reproduces 1-token decodes).
//
// Operands are read through accessors: w(c) -> float may decode any stored type (F32/F16/BF16
// and the GGML blocks, dequant.h's dequant_elem), so the matmul decodes quantised weights in
// registers and a decode step reads Q4_1's 4.5 bits per weight rather than a 16-bit copy. With
// 32 lanes and 32-element blocks, one warp step reads exactly one block (coalesced).
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/common/hd.h"

namespace ssd::kernels::hd {

// Lanes of one dot product (a CUDA warp).
inline constexpr int kDotLanes = 32;

// a * b + c with one rounding: fmaf on the device, std::fma on the host (what matmul.cu does).
SSD_HD float fma_f(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
  return fmaf(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}

// Lane `lane`'s partial of sum_c w(c) x(c) over c < n: c = lane, lane + 32, ... in order.
template <class W, class X>
SSD_HD float lane_dot(W&& w, X&& x, int64_t n, int lane) {
  float acc = 0.0f;
  for (int64_t c = lane; c < n; c += kDotLanes) acc = fma_f(w(c), x(c), acc);
  return acc;
}

// The device's xor butterfly over 32 lane partials (for o = 16, 8, ..., 1: every lane adds the
// partial of lane ^ o), run on the host; returns what every lane ends with. Overwrites p.
SSD_HD float butterfly32(float* p) {
  for (int o = kDotLanes / 2; o > 0; o /= 2) {
    float next[kDotLanes];
    for (int l = 0; l < kDotLanes; ++l) next[l] = p[l] + p[l ^ o];
    for (int l = 0; l < kDotLanes; ++l) p[l] = next[l];
  }
  return p[0];
}

// The full dot product in the device's order, on one thread (the twin).
template <class W, class X>
SSD_HD float warp_order_dot(W&& w, X&& x, int64_t n) {
  float p[kDotLanes];
  for (int l = 0; l < kDotLanes; ++l) p[l] = lane_dot(w, x, n, l);
  return butterfly32(p);
}

}  // namespace ssd::kernels::hd
