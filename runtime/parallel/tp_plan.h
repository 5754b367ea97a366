// How a model is split over a tensor-parallel group of T ranks, decided once at start-up from the
// model config and passed down. Pure arithmetic: no weights, no communication.
//
//   attention: query heads split as evenly as possible (the first n_heads % T ranks get one more);
//              a rank holds every KV head its query heads read (GQA groups may straddle ranks, so
//              a KV head can be replicated on two ranks); wq/wk/wv are column-parallel (row slices
//              of the weight).
//   MLP:       ffn columns split in whole quantization blocks of the weight type, as evenly as
//              possible; w_gate/w_up column-parallel (row slices).
//   LM head:   vocab rows split evenly (vocab-parallel), logits gathered to every rank.
//   o_proj and down_proj, two layouts (TpMode):
//     Exact     row slices too: rank r computes output rows [dim_begin, dim_end) from the WHOLE
//               input, so the block's inputs are all-gathered (attention output, MLP activation)
//               and so are its outputs: four all-gathers per block. Every output value is then
//               computed by exactly one rank with exactly the arithmetic of T = 1, so logits are
//               bit-identical at every T, whatever the kernels do inside a row.
//     Megatron  column slices (row-parallel): each rank multiplies its own heads' / ffn columns'
//               share and the partial outputs are all-reduced: two all-reduces per block, less
//               traffic. The sums are grouped differently at each T; with float kernels that is a
//               ~1e-7 relative difference, but the integer matmul path quantizes activations to
//               8 bits per block, and any perturbation flips some codes: measured on
//               SmolLM2-135M Q4_1, logits differ from T = 1 by up to 1e-1 relative and greedy
//               output diverges within 32 tokens. So Exact is the default; Megatron is kept for
//               float weights and for studies of the communication cost.
// T = 1 is the whole model on one rank. Any T in 1..n_heads is valid.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/model/model_config.h"

namespace ssd {

enum class TpMode { Exact, Megatron };
const char* tp_mode_name(TpMode m);

struct TpShard {
  int rank = 0, size = 1;
  std::vector<int32_t> q_heads;     // global query heads held, ascending
  std::vector<int32_t> kv_heads;    // global KV heads held, ascending
  std::vector<int32_t> kv_head_of;  // [q_heads.size()] local index into kv_heads per local q head
  int64_t ffn_begin = 0, ffn_end = 0;      // ffn columns [begin, end) held
  int64_t vocab_begin = 0, vocab_end = 0;  // LM-head rows [begin, end) held
  int64_t dim_begin = 0, dim_end = 0;      // TpMode::Exact: o_proj / down_proj rows held
};

// Throws ssd::Error naming the values when T < 1, T > n_heads, or the ffn dimension cannot give
// every rank at least one block of `ffn_block` columns.
TpShard plan_tp_shard(const ModelConfig& cfg, int rank, int size, int64_t ffn_block);

}  // namespace ssd
