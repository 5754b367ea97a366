// One fused Domino head walk (the correction loop of runtime/drafters/domino/domino_head.h over
// whole blocks: GRU step, low-rank correction, base add, argmax or draw, feed back), as a
// backend op. A backend that has it (Backend::has_domino_walk; the CUDA backend: one kernel for
// greedy walks, kernels/cuda/domino_walk.cu, and a launch per position with the device
// sampler's kernels between for sampled ones, domino_sampled_walk.h) runs every chain's every
// position without returning to the host; the CPU backend has none and the head runs op by op
// (domino_head.cpp). The per-step arithmetic of both is kernels/common/domino_math.h.
//
// Shapes: d = target_dim, g = gru_dim, r = rank, Vd = draft vocabulary size; `rows` = the sum of
// the chains' lengths. Chain c owns rows first[c] .. first[c + 1] - 1 (its positions 1..k in
// order), like DominoBackbone::Result::offset.
#pragma once

#include <cstdint>

#include <vector>

#include "runtime/backend/weight.h"
#include "runtime/sampling/sampler.h"

namespace ssd {

// A chain's draws in a sampled walk: position i's token is drawn from q_i = process(final_i,
// cfg) with philox_uniform(cfg.seed, stream, step + i - 1, kLaneDominoDraft), as the host walk
// draws it. temperature 0: the chain is greedy (argmax).
struct DominoWalkSampler {
  SamplerConfig cfg;
  uint64_t stream = 0;
  uint32_t step = 0;  // the Philox step of position 1
};

// What a sampled walk returns besides the tokens: every row's q list, CSR over the rows (a
// greedy row's list is empty: its q is the one-hot of its token).
struct DominoWalkLists {
  std::vector<int64_t> off;   // [rows + 1]
  std::vector<int32_t> ids;   // [off[rows]] target ids, in the list's order
  std::vector<double> probs;  // [off[rows]]
};

struct DominoWalkCall {
  // Weights as this backend's prepare_weight returned them.
  const Weight* token_embd = nullptr;  // [V, d] the target's embeddings
  const Weight* w_ih = nullptr;        // [3g, d]
  const Weight* w_hh = nullptr;        // [3g, g]
  const Weight* w1 = nullptr;          // [r, d + g]
  const Weight* w2 = nullptr;          // [Vd, r]
  const float* b_ih = nullptr;                        // [3g] host or backend memory
  const float* b_hh = nullptr;                        // [3g]
  const int32_t* vocab_ids = nullptr;  // [Vd] draft index -> target id; null = identity
  const int32_t* vocab_ids_host = nullptr;  // the same on the host (sampled walks map with it)
  int64_t d = 0, g = 0, r = 0, vd = 0;
  bool use_head = true;                // false: final = base (argmax of the base logits)

  float* logits = nullptr;             // [rows, Vd] backend memory: base in, final out
  const float* hidden = nullptr;       // [rows, d] backend memory: h_i after the final norm
  const int64_t* first = nullptr;      // [chains + 1] host
  const int32_t* anchors = nullptr;    // [chains] host: the token before each chain's position 1
  int64_t chains = 0;
  int32_t* tokens = nullptr;           // [rows] host out: target ids (-1: row all NaN)
  // Sampled walks: samplers [chains] host (null: every chain greedy), and their q lists out. A
  // sampled row the CPU sampler would refuse (+inf, nothing finite) throws its message.
  const DominoWalkSampler* samplers = nullptr;
  DominoWalkLists* lists = nullptr;
};

}  // namespace ssd
