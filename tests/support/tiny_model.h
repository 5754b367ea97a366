// Tiny random Llama-family models for engine tests, written to disk in either format so that the
// real loading path is exercised. Sizes are small but awkward enough to catch indexing bugs
// (GQA with 2 query heads per KV head, vocab 261, two layers), and large enough for every weight
// type's block size (dim 256, ffn 512 so K-quants fit).
//
//   TempDir tmp;
//   TinyModelSpec spec;  spec.arch = Arch::Qwen2;  spec.weight_type = DType::Q4_K;
//   std::string path = write_tiny_gguf(spec, tmp.file("m.gguf"));
//   std::string dir  = write_tiny_safetensors(spec, tmp.path());   // config.json + weights
//
// Both writers store the same underlying Hugging Face weights: the GGUF Llama writer permutes Q/K
// rows as the llama.cpp converter does (for its interleaved RoPE), so the two files must give the
// same logits.
#pragma once

#include <cstdint>
#include <string>

#include "runtime/core/dtype.h"
#include "runtime/model/model_config.h"

namespace ssd::test {

struct TinyModelSpec {
  Arch arch = Arch::Llama;
  DType weight_type = DType::F32;  // matrices; norms are F32 (GGUF) or the checkpoint dtype (HF)
  int64_t n_layers = 2;
  int64_t dim = 256;
  int64_t ffn_dim = 512;
  int64_t n_heads = 4;
  int64_t n_kv_heads = 2;
  int64_t head_dim = 64;  // Qwen3 tiny models use 128 so that n_heads * head_dim != dim
  int64_t vocab = 261;
  int64_t context = 512;
  bool tied = false;
  bool llama3_rope = false;  // llama3 frequency scaling (GGUF: rope_freqs.weight; HF: rope_scaling)
  float rope_theta = 10000.0f;
  uint64_t seed = 7;
  // Multiplies the final norm's weights: > 1 sharpens every next-token distribution (random
  // models are otherwise nearly flat), e.g. for tests of drafters that learn the target's peaks.
  float head_sharpness = 1.0f;
};

// A spec with the defaults adjusted for the architecture (Qwen3 head_dim 128).
TinyModelSpec tiny_spec(Arch arch, DType weight_type);

std::string write_tiny_gguf(const TinyModelSpec& spec, const std::string& path);
// Writes config.json, tokenizer.json and the weights (F32, F16 or BF16) into `dir`: one
// model.safetensors, or `shards` shard files plus model.safetensors.index.json. Returns dir.
std::string write_tiny_safetensors(const TinyModelSpec& spec, const std::string& dir, int shards = 1);

}  // namespace ssd::test
