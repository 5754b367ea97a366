// Hyper-parameters of a Domino drafter ("Domino: Decoupling Causal Modeling from Autoregressive
// Drafting in Speculative Decoding": a DFlash-style block-parallel backbone plus the Domino
// causal head), as stored in its checkpoint. The config lives INSIDE the safetensors file,
// as a JSON string under the "__metadata__" key "domino_config", so one file is one drafter and
// the weights can never be paired with the wrong config. Every field is required (the trainer
// writes all of them); extra keys are ignored so the trainer can add provenance:
//
//   {"block_size": 8, "n_layers": 2, "heads": 4, "kv_heads": 2, "head_dim": 64, "ffn_dim": 512,
//    "target_layers": [0, 1], "gru_dim": 64, "rank": 32, "rms_eps": 1e-5,
//    "rope_theta": 10000.0, "target_dim": 256, "target_vocab": 261}
//
// Optional: "draft_vocab": [ids...], a reduced draft vocabulary (FR-Spec style: the most frequent
// target tokens, strictly increasing ids). The drafter then scores only those ids (its LM head is
// the target's rows for them, head.w2.weight has one row per id) and drafts only them; absent or
// [] = the whole vocabulary. Verification is untouched: acceptance is always judged by the
// target over its full vocabulary, so a reduced vocabulary can cost acceptance, never exactness.
//
// Optional: "context_inject": true adds the tensor ctx_inject.weight [d, d]: the projected features
// of the last visible context position, W_inject c_{n_ctx-1}, are added to the input of EVERY
// block row (EAGLE-style fusion of the newest target state into the rows that predict from it;
// without it the rows reach the context only through attention). Absent = false.
//
// The drafter's width is target_dim (it reuses the target's token embeddings and LM head), so
// the config has no separate "dim". RoPE is NeoX-style (rotate halves, as in Hugging Face Llama)
// over the whole head_dim, with no frequency scaling.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ssd {

struct DominoConfig {
  int32_t block_size = 0;              // B: block = [anchor, MASK x (B - 1)]; drafts up to B - 1
  int32_t n_layers = 0;                // backbone decoder layers
  int32_t n_heads = 0;                 // "heads": query heads
  int32_t n_kv_heads = 0;              // "kv_heads": key/value heads (GQA)
  int32_t head_dim = 0;
  int32_t ffn_dim = 0;                 // SwiGLU hidden width
  std::vector<int32_t> target_layers;  // target layers whose hidden states form the features
  int32_t gru_dim = 0;                 // g: Domino head GRU width
  int32_t rank = 0;                    // r: low-rank correction bottleneck
  float rms_eps = 1e-6f;               // every RMSNorm of the drafter
  float rope_theta = 10000.0f;
  int64_t target_dim = 0;              // d: the target's residual width (also the drafter's)
  int64_t target_vocab = 0;
  std::vector<int32_t> draft_vocab;    // strictly increasing target ids; empty = all of them
  bool context_inject = false;         // ctx_inject.weight: last context entry into every row

  // Width of one token's concatenated target features: target_layers.size() * target_dim.
  int64_t feature_dim() const { return static_cast<int64_t>(target_layers.size()) * target_dim; }
  // Rows of the drafter's logits: len(draft_vocab), or target_vocab when it is empty.
  int64_t draft_vocab_size() const {
    return draft_vocab.empty() ? target_vocab : static_cast<int64_t>(draft_vocab.size());
  }

  // Parses the JSON text; throws ssd::Error naming `source` and the field on a missing field, a
  // wrong type or an impossible value (validate()).
  static DominoConfig from_json(const std::string& text, const std::string& source);
  std::string to_json() const;
  // Internal consistency: positive sizes, heads divisible by kv_heads, even head_dim, ...
  void validate(const std::string& source) const;
  // Against the target it drafts for: every target layer exists (0 <= l < target_depth),
  // target_dim and target_vocab equal the target's. Throws before any generation.
  void check_target(int64_t target_depth, int64_t target_dim_actual, int64_t target_vocab_actual,
                    const std::string& source) const;
};

}  // namespace ssd
