// A Domino drafter checkpoint on disk: ONE safetensors file (F32, F16 or BF16 tensors) whose
// "__metadata__" holds the config as JSON under the key "domino_config" (domino_config.h). The
// trainer (a later issue) writes exactly this; tests/support/domino_writer.h writes random ones.
//
// Tensor names and shapes (safetensors order, outermost first; a Linear weight is [out, in]).
// d = target_dim, F = len(target_layers) * target_dim, H = heads * head_dim,
// KV = kv_heads * head_dim, g = gru_dim, r = rank, V = target_vocab, Vd = draft_vocab_size()
// (V unless the config has a draft vocabulary):
//
//   fc.weight                                   [d, F]      context projection (no bias)
//   fc_norm.weight                              [d]         RMSNorm gain of the context features
//   mask_embedding                              [d]         the learned MASK token vector
//   ctx_inject.weight                           [d, d]      only with "context_inject": the last
//                                                           context entry's term in every row
//   layers.{l}.input_layernorm.weight           [d]         for l in 0..n_layers-1
//   layers.{l}.self_attn.q_proj.weight          [H, d]
//   layers.{l}.self_attn.k_proj.weight          [KV, d]
//   layers.{l}.self_attn.v_proj.weight          [KV, d]
//   layers.{l}.self_attn.o_proj.weight          [d, H]
//   layers.{l}.post_attention_layernorm.weight  [d]
//   layers.{l}.mlp.gate_proj.weight             [ffn_dim, d]
//   layers.{l}.mlp.up_proj.weight               [ffn_dim, d]
//   layers.{l}.mlp.down_proj.weight             [d, ffn_dim]
//   norm.weight                                 [d]         final RMSNorm before the LM head
//   head.gru.weight_ih                          [3g, d]     PyTorch nn.GRU layout: rows are the
//   head.gru.weight_hh                          [3g, g]       (reset | update | new) gates
//   head.gru.bias_ih                            [3g]
//   head.gru.bias_hh                            [3g]
//   head.w1.weight                              [r, d + g]  input is [h_i ; s_{i-1}] (no bias)
//   head.w2.weight                              [Vd, r]     (no bias)
//
// The target's token embeddings and LM head are NOT stored: the drafter uses the target's own.
// Every tensor is required (also when drafting with the head off) and checked against the
// config; extra tensors are rejected so a misspelt name cannot go unnoticed.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "runtime/drafters/domino/domino_config.h"
#include "runtime/io/safetensors_file.h"
#include "runtime/model/model_weights.h"

namespace ssd {

// A backbone layer's tensors: the same roles as a target layer (the optional bias and Q/K-norm
// tensors stay null), so both run through prepare_decoder_layer / run_decoder_layer.
using DominoLayerTensors = LayerWeights;

struct DominoHeadTensors {
  const TensorRef* gru_w_ih = nullptr;  // [3g, d]
  const TensorRef* gru_w_hh = nullptr;  // [3g, g]
  const TensorRef* gru_b_ih = nullptr;  // [3g]
  const TensorRef* gru_b_hh = nullptr;  // [3g]
  const TensorRef* w1 = nullptr;        // [r, d + g]
  const TensorRef* w2 = nullptr;        // [V, r]
};

// One expected tensor: its name and safetensors shape (outermost first).
struct DominoTensorSpec {
  std::string name;
  std::vector<uint64_t> shape;
};
// Every tensor a checkpoint with this config must hold, in a fixed order.
std::vector<DominoTensorSpec> domino_tensor_specs(const DominoConfig& cfg);


class DominoCheckpoint {
 public:
  // Opens and checks the file: config present and valid, every tensor present with its shape and
  // a supported dtype, nothing extra. Throws ssd::Error naming the file and the field or tensor.
  static DominoCheckpoint open(const std::string& path);
  DominoCheckpoint(DominoCheckpoint&&) noexcept = default;
  DominoCheckpoint& operator=(DominoCheckpoint&&) noexcept = default;

  const std::string& path() const { return path_; }
  const DominoConfig& config() const { return cfg_; }
  // Any tensor of the file by its checkpoint name (null when absent).
  const TensorRef* find(std::string_view name) const { return file_->find_tensor(name); }

  const TensorRef* fc = nullptr;              // [d, F]
  const TensorRef* fc_norm = nullptr;         // [d]
  const TensorRef* mask_embedding = nullptr;  // [d]
  const TensorRef* ctx_inject = nullptr;      // [d, d] (null without context_inject)
  const TensorRef* final_norm = nullptr;      // [d]
  std::vector<DominoLayerTensors> layers;     // [n_layers]
  DominoHeadTensors head;

 private:
  DominoCheckpoint() = default;
  std::string path_;
  DominoConfig cfg_;
  std::unique_ptr<SafetensorsModel> file_;  // owns the mapping every TensorRef points into
};

}  // namespace ssd
