// The shape of a transformer as the round simulator needs it: what one forward reads (weights,
// KV cache) and computes (FLOPs), not its weights. From a preset, a GGUF file or a Hugging Face
// checkpoint directory / config.json (runtime/model's own config loading, so every architecture
// the engine runs is understood the same way here).
//
// Per layer: Q [dim, H hd], K and V [dim, Hkv hd] each, O [H hd, dim], gate/up/down [dim, ffn]
// x 3; plus the LM head [vocab, dim] (a tied head is the embedding, counted once). A forward of
// `rows` query tokens reads every weight once and each cached token's K and V in every layer, and
// computes 2 x params x rows FLOPs in the matmuls plus 4 x rows x context x H hd x layers in
// attention (QK^T and PV). The head runs only over the rows whose logits are asked
// (Batch::logits_rows): a forward asking none (a drafter's catch-up) neither reads nor multiplies
// it (runtime/model/transformer.cpp), see roofline.h.
//
// Drafting style: an autoregressive drafter (a small LM) needs one forward per drafted token; a
// block drafter (Domino) drafts a whole block in ONE forward over [known tokens, MASK x k]; an
// n-gram drafter reads no weights (a host-side lookup, priced by SimDrafter::lookup_s).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ssd::sim {

enum class DraftStyle { kAutoregressive, kBlock, kLookup };

struct ModelShape {
  std::string name;
  int64_t n_layers = 0, dim = 0, ffn_dim = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0;
  int64_t vocab = 0;
  double weight_bytes_per_param = 2;  // bf16 = 2; Q4_1 = 20 / 32; overridden by weight_bytes
  double weight_bytes = 0;            // > 0: the file's actual weight bytes (mixed types)
  double head_weight_bytes = 0;       // > 0: the file's LM head bytes (a tied head: the embedding)
  double kv_bytes_per_elem = 2;       // KV cache element (bf16 / f16)
  double act_bytes_per_elem = 2;      // activations on the TP wire
  std::string compute_dtype = "bf16";  // which DeviceProfile peak the matmuls run at
  int64_t feature_dim = 0;  // a drafter conditioned on target features: floats per token
  DraftStyle style = DraftStyle::kAutoregressive;

  double params() const;           // weights' elements (layers + LM head)
  double total_weight_bytes() const;
  double head_params() const { return static_cast<double>(vocab * dim); }  // the LM head [vocab, dim]
  double head_bytes() const;  // what a forward with no logits row does not read
  double kv_bytes_per_token() const;  // K + V over every layer
  double attn_width() const { return static_cast<double>(n_heads * head_dim); }

  // Throws ssd::Error naming the field: zero sizes, heads not a multiple of KV heads, ...
  void validate() const;
  // Throws ssd::Error when `tp` does not divide the query or KV heads (a TP group splits heads).
  void check_tp(int32_t tp) const;
};

// llama-3.1-70b, llama-3.2-1b, qwen3-32b, qwen3-0.6b, smollm2-135m (Q4_1, as the default GGUF),
// smollm2-domino (the 4-layer Domino drafter of models/smollm2-domino, block style).
ModelShape model_preset(const std::string& name);
std::vector<std::string> model_preset_names();

// A preset name, or a path: a GGUF file, a checkpoint directory or its config.json.
ModelShape load_model_shape(const std::string& name_or_path);

}  // namespace ssd::sim
