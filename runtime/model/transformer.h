// The Llama-family transformer (pre-norm decoder blocks: RMSNorm -> GQA attention with RoPE ->
// residual -> RMSNorm -> SwiGLU MLP -> residual; final RMSNorm and LM head), written against the
// Backend interface. Its one entry point is forward(Batch): see batch.h for what a batch can be.
//
// Tensor-parallel seam (a later issue): attention heads and MLP columns split per rank, with one
// all-reduce after the o_proj and one after the down_proj matmul; both points are marked below.
#pragma once

#include <vector>

#include "runtime/backend/backend.h"
#include "runtime/model/batch.h"
#include "runtime/model/model_file.h"

namespace ssd {

class Transformer {
 public:
  // The model file must outlive the transformer (weights stay in its mapping).
  Transformer(const ModelFile& model, Backend& backend);
  Transformer(const Transformer&) = delete;
  Transformer& operator=(const Transformer&) = delete;

  const ModelConfig& config() const { return cfg_; }
  Backend& backend() { return backend_; }
  // A cache shaped for this model holding up to max_tokens positions over all sequences.
  KvCacheConfig kv_config(int64_t max_tokens) const;

  // Runs the batch, appending its K/V to the cache. On any error the cache is rolled back to the
  // lengths it had before the call, and ssd::Error is thrown.
  ForwardResult forward(const Batch& batch, KvCache& kv);

 private:
  struct Layer {
    kernels::WeightMatrix wq, wk, wv, wo, w_gate, w_up, w_down;
    std::vector<float> attn_norm, ffn_norm;  // [dim]
    std::vector<float> bq, bk, bv;           // [n_heads*head_dim], [kv*head_dim] x2; empty if none
    std::vector<float> q_norm, k_norm;       // [head_dim]; empty if none
  };
  void run(const Batch& b, KvCache& kv, const std::vector<int64_t>& cache_pos,
           ForwardResult& out);

  const ModelConfig& cfg_;
  Backend& backend_;
  kernels::WeightMatrix token_embd_, output_;
  std::vector<float> output_norm_;  // [dim]
  std::vector<float> inv_freq_;     // [rope_dim / 2]
  std::vector<Layer> layers_;

  // Workspace, grown to the largest batch seen.
  std::vector<float> x_, h_, q_, k_, v_, attn_, o_, gate_, up_;
};

}  // namespace ssd
