// How a model is split over a tensor-parallel group of T ranks (Megatron style), decided once at
// start-up from the model config and passed down. Pure arithmetic: no weights, no communication.
//
//   attention: query heads split as evenly as possible (the first n_heads % T ranks get one more);
//              a rank holds every KV head its query heads read (GQA groups may straddle ranks, so
//              a KV head can be replicated on two ranks); wq/wk/wv are column-parallel (row slices
//              of the weight), wo row-parallel (a column slice), one all-reduce after wo.
//   MLP:       ffn columns split in whole quantization blocks of the weight type, as evenly as
//              possible; w_gate/w_up column-parallel, w_down row-parallel, one all-reduce after it.
//   LM head:   see the plan's vocab range (vocab-parallel rows, logits gathered to every rank).
// T = 1 is the whole model on one rank. Any T in 1..n_heads is valid.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/model/model_config.h"

namespace ssd {

struct TpShard {
  int rank = 0, size = 1;
  std::vector<int32_t> q_heads;     // global query heads held, ascending
  std::vector<int32_t> kv_heads;    // global KV heads held, ascending
  std::vector<int32_t> kv_head_of;  // [q_heads.size()] local index into kv_heads per local q head
  int64_t ffn_begin = 0, ffn_end = 0;      // ffn columns [begin, end) held
  int64_t vocab_begin = 0, vocab_end = 0;  // LM-head rows [begin, end) held
};

// Throws ssd::Error naming the values when T < 1, T > n_heads, or the ffn dimension cannot give
// every rank at least one block of `ffn_block` columns.
TpShard plan_tp_shard(const ModelConfig& cfg, int rank, int size, int64_t ffn_block);

}  // namespace ssd
