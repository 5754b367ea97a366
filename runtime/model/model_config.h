// The hyper-parameters of a Llama-family transformer, decided once when a model file is opened
// and passed down read-only. One struct covers every supported architecture; the flags at the
// bottom say which optional pieces (QKV bias, per-head Q/K norm, tied embeddings) a model has.
//
// Architectures: Llama 2/3 (incl. llama3 RoPE frequency scaling), SmolLM2 (Llama with tied
// embeddings), Qwen2 (QKV bias), Qwen3 (per-head RMSNorm on Q and K before RoPE).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/backend/rope_layout.h"

namespace ssd {

enum class Arch { Llama, Qwen2, Qwen3 };
const char* arch_name(Arch a);

struct RopeScaling {
  enum class Kind { None, Linear, Llama3 };
  Kind kind = Kind::None;
  float factor = 1.0f;
  float low_freq_factor = 1.0f;   // llama3 only
  float high_freq_factor = 4.0f;  // llama3 only
  int64_t original_context = 8192;
};

struct ModelConfig {
  Arch arch = Arch::Llama;
  int64_t n_layers = 0;
  int64_t dim = 0;         // residual stream width
  int64_t ffn_dim = 0;     // SwiGLU hidden width
  int64_t n_heads = 0;     // query heads
  int64_t n_kv_heads = 0;  // key/value heads (grouped-query attention: n_heads % n_kv_heads == 0)
  int64_t head_dim = 0;    // usually dim / n_heads; Qwen3 sets it explicitly
  int64_t vocab = 0;
  int64_t context_length = 0;
  float rms_eps = 1e-5f;
  float rope_theta = 10000.0f;
  int64_t rope_dim = 0;  // rotated dims per head (== head_dim for every supported arch)
  RopeLayout rope_layout = RopeLayout::NeoX;
  RopeScaling rope_scaling;
  bool tied_embeddings = false;  // LM head shares the token embedding matrix
  bool qkv_bias = false;         // Qwen2
  bool qk_norm = false;          // Qwen3

  // Throws ssd::Error naming the first inconsistent field (zero sizes, heads not dividing, ...).
  void validate(const std::string& source) const;
};

// Per-frequency inverse frequencies for RoPE, [rope_dim / 2], with the model's scaling applied.
// `freq_factors` (optional, GGUF rope_freqs.weight) divides each frequency as llama3 GGUFs store it.
std::vector<float> rope_inv_freq(const ModelConfig& cfg, const std::vector<float>* freq_factors);

}  // namespace ssd
