// The Domino head's per-step arithmetic (runtime/drafters/domino/domino_head.h has the
// equations), as SSD_HD functions shared by the CPU head (domino_head.cpp), the fused CUDA walk
// (kernels/cuda/domino_walk.cu) and the CPU twin of that walk (tests/support/domino_twin.h):
//
//   gates   gi = W_ih emb(tok) + b_ih, gh = W_hh s + b_hh           [3g] each
//   state   s'[u] = gru_unit(gi[u], gi[g+u], gi[2g+u], gh[u], gh[g+u], gh[2g+u], s[u])
//   input   in = [h ; s]                                            [d + g]
//   mid     m[j] = silu(W1[j] . in)                                 [r]
//   final   f[v] = base[v] + W2[v] . m                              [Vd]
//   pick    the argmax of f (lowest index on ties, NaN never wins), mapped to a target id
//           through the draft vocabulary when there is one
//
// The matrix-vector products: the CPU head runs them through Backend::matmul (its SIMD kernels,
// their own summation order). The device walk and its twin use lane_dot() + butterfly32()
// (invariant_dot.h): lane l of a warp sums c = l, l + 32, ... with fused multiply-adds, then the 32 lanes combine by an
// xor butterfly, which is exactly the order of the CUDA backend's batch-invariant matmul
// (kernels/cuda/matmul.cu). So on a GPU the fused walk gives the bits the op-by-op head would
// give there, and on the host the twin gives the device's bits except for exp/tanh (expf /
// tanhf differ from std::exp / std::tanh by a few ulp; see row_math.h's exp_f).
// Weights are read as float through an accessor (BF16 bit patterns on the device, decoded
// exactly, so the twin may hold the same values as float).
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/common/hd.h"
#include "kernels/common/invariant_dot.h"
#include "kernels/common/row_math.h"

namespace ssd::kernels::hd {

// A gate pre-activation: the product plus its bias (the CPU head: matmul, then add_bias).
SSD_HD float domino_gate(float product, float bias) { return add_rn(product, bias); }

// New state of unit u from the gate pre-activations gi, gh ([3g]: reset | update | new).
SSD_HD float domino_gru_state(const float* gi, const float* gh, int64_t g, int64_t u, float s) {
  return gru_unit(gi[u], gi[g + u], gi[2 * g + u], gh[u], gh[g + u], gh[2 * g + u], s);
}

// Element c of W1's input [h ; s] (h: [d], s: [g]).
SSD_HD float domino_w1_input(const float* h, const float* s, int64_t d, int64_t c) {
  return c < d ? h[c] : s[c - d];
}

// One final logit: base + correction (the CPU head: Backend::add).
SSD_HD float domino_final(float base, float correction) { return add_rn(base, correction); }

// Whether (a, ia) beats (b, ib) for the argmax: larger value, then lower index; an index < 0 is
// "nothing yet" and loses; the caller skips NaN values. ssd::argmax's rule.
SSD_HD bool argmax_better(float a, int32_t ia, float b, int32_t ib) {
  if (ia < 0) return false;
  if (ib < 0) return true;
  return a > b || (a == b && ia < ib);
}

// The argmax of row[0, n) by argmax_better, skipping NaN; -1 when every value is NaN.
SSD_HD int32_t argmax_row(const float* row, int32_t n) {
  float bv = 0.0f;
  int32_t bi = -1;
  for (int32_t i = 0; i < n; ++i) {
    const float v = row[i];
    if (v != v) continue;
    if (argmax_better(v, i, bv, bi)) {
      bv = v;
      bi = i;
    }
  }
  return bi;
}

// Draft-vocabulary index -> target id (ids null: the draft vocabulary is the whole vocabulary;
// index < 0 stays < 0). ids are strictly increasing, so the lowest index on ties is also the
// lowest target id, as ssd::argmax over the scattered full row picks it.
SSD_HD int32_t domino_target_id(const int32_t* ids, int32_t index) {
  return ids == nullptr || index < 0 ? index : ids[index];
}

}  // namespace ssd::kernels::hd
