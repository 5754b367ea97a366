// Where each weight of a Llama-family model lives: pointers to TensorRefs inside the mapped model
// file (never copies). Names differ between GGUF ("blk.3.attn_q.weight") and Hugging Face
// safetensors ("model.layers.3.self_attn.q_proj.weight"); the loader resolves them into this one
// structure and checks every shape against the ModelConfig before anything runs.
#pragma once

#include <vector>

#include "runtime/io/tensor_ref.h"

namespace ssd {

struct LayerWeights {
  const TensorRef* attn_norm = nullptr;  // [dim]
  const TensorRef* wq = nullptr;         // [n_heads * head_dim, dim]   (rows x cols)
  const TensorRef* wk = nullptr;         // [n_kv_heads * head_dim, dim]
  const TensorRef* wv = nullptr;         // [n_kv_heads * head_dim, dim]
  const TensorRef* wo = nullptr;         // [dim, n_heads * head_dim]
  const TensorRef* bq = nullptr;         // [n_heads * head_dim]     Qwen2 only
  const TensorRef* bk = nullptr;         // [n_kv_heads * head_dim]  Qwen2 only
  const TensorRef* bv = nullptr;         // [n_kv_heads * head_dim]  Qwen2 only
  const TensorRef* q_norm = nullptr;     // [head_dim]               Qwen3 only
  const TensorRef* k_norm = nullptr;     // [head_dim]               Qwen3 only
  const TensorRef* ffn_norm = nullptr;   // [dim]
  const TensorRef* w_gate = nullptr;     // [ffn_dim, dim]
  const TensorRef* w_up = nullptr;       // [ffn_dim, dim]
  const TensorRef* w_down = nullptr;     // [dim, ffn_dim]
};

struct ModelWeights {
  const TensorRef* token_embd = nullptr;   // [vocab, dim]
  const TensorRef* output_norm = nullptr;  // [dim]
  const TensorRef* output = nullptr;       // [vocab, dim]; == token_embd when tied
  const TensorRef* rope_freqs = nullptr;   // [rope_dim / 2] llama3 GGUF frequency factors, optional
  std::vector<LayerWeights> layers;
};

}  // namespace ssd
