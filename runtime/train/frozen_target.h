// The frozen parts of the target that a Domino drafter trains against, dequantized to float once:
// the token embeddings (anchor rows of a block, GRU inputs) and the LM head rows the drafter
// scores (all of them, or the draft vocabulary's). Also the initialisation of backbone layers
// from target layers (--init-layers). Nothing here is ever updated.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/model/model_file.h"
#include "runtime/train/domino_params.h"

namespace ssd::train {

class FrozenTarget {
 public:
  // draft_vocab: strictly increasing target ids, or empty for the whole vocabulary.
  FrozenTarget(const ModelFile& model, std::vector<int32_t> draft_vocab);
  FrozenTarget(const FrozenTarget&) = delete;
  FrozenTarget& operator=(const FrozenTarget&) = delete;

  int64_t dim() const { return dim_; }
  int64_t vocab() const { return vocab_; }
  int64_t draft_vocab_size() const { return static_cast<int64_t>(head_ids_.size()); }
  const float* embedding(int32_t token) const { return emb_.data() + token * dim_; }
  const float* head() const { return head_ptr_; }  // [Vd, d]
  // Row of a target id in the drafter's logits, or -1 outside the draft vocabulary.
  int32_t draft_index(int32_t token) const { return index_[token]; }
  // Target id of a logits row.
  int32_t target_id(int64_t row) const { return head_ids_[row]; }

 private:
  int64_t dim_ = 0, vocab_ = 0;
  std::vector<float> emb_;       // [V, d]
  std::vector<float> head_;      // [Vd, d] (empty when head_ptr_ points at emb_)
  const float* head_ptr_ = nullptr;
  std::vector<int32_t> index_;   // [V]
  std::vector<int32_t> head_ids_;  // [Vd]
};

// Copies target layer `target_layer` (dequantized; Q/K rows un-permuted back to the NeoX halves
// layout when the target file stores them for interleaved RoPE) into backbone layer `l` of the
// parameters. Returns false (copying nothing) when the shapes differ (heads, kv heads, head_dim,
// ffn_dim) or the target layer has biases / Q-K norms the drafter does not have.
bool copy_target_layer(const ModelFile& model, int64_t target_layer, const DominoConfig& cfg,
                       DominoView& p, int64_t l);

// Copies the target's output norm gain [dim] into out; false (nothing copied) when the target's
// dim is not `dim` or it has no output norm.
bool copy_target_output_norm(const ModelFile& model, int64_t dim, float* out);

}  // namespace ssd::train
