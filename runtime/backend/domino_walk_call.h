// One fused Domino head walk (the greedy correction loop of runtime/drafters/domino/
// domino_head.h over whole blocks: GRU step, low-rank correction, base add, argmax, feed back),
// as a backend op. A backend that has the fused kernel (Backend::has_domino_walk; the CUDA
// backend, kernels/cuda/domino_walk.cu) runs every chain's every position without returning to
// the host; the CPU backend has none and the head runs op by op (domino_head.cpp). The per-step
// arithmetic of both is kernels/common/domino_math.h.
//
// Shapes: d = target_dim, g = gru_dim, r = rank, Vd = draft vocabulary size; `rows` = the sum of
// the chains' lengths. Chain c owns rows first[c] .. first[c + 1] - 1 (its positions 1..k in
// order), like DominoBackbone::Result::offset.
#pragma once

#include <cstdint>

#include "kernels/cpu/matmul.h"

namespace ssd {

struct DominoWalkCall {
  // Weights as this backend's prepare_weight returned them.
  const kernels::WeightMatrix* token_embd = nullptr;  // [V, d] the target's embeddings
  const kernels::WeightMatrix* w_ih = nullptr;        // [3g, d]
  const kernels::WeightMatrix* w_hh = nullptr;        // [3g, g]
  const kernels::WeightMatrix* w1 = nullptr;          // [r, d + g]
  const kernels::WeightMatrix* w2 = nullptr;          // [Vd, r]
  const float* b_ih = nullptr;                        // [3g] host or backend memory
  const float* b_hh = nullptr;                        // [3g]
  const int32_t* vocab_ids = nullptr;  // [Vd] draft index -> target id; null = identity
  int64_t d = 0, g = 0, r = 0, vd = 0;
  bool use_head = true;                // false: final = base (argmax of the base logits)

  float* logits = nullptr;             // [rows, Vd] backend memory: base in, final out
  const float* hidden = nullptr;       // [rows, d] backend memory: h_i after the final norm
  const int64_t* first = nullptr;      // [chains + 1] host
  const int32_t* anchors = nullptr;    // [chains] host: the token before each chain's position 1
  int64_t chains = 0;
  int32_t* tokens = nullptr;           // [rows] host out: greedy target ids (-1: row all NaN)
};

}  // namespace ssd
