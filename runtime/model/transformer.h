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
  // The model file must outlive the transformer (weights stay in its mapping). `layers` > 0 runs
  // only the first `layers` blocks (early-exit self-speculation shares the target's weights this
  // way); the LM head then applies to block layers-1's output.
  Transformer(const ModelFile& model, Backend& backend, int64_t layers = 0);
  Transformer(const Transformer&) = delete;
  Transformer& operator=(const Transformer&) = delete;

  const ModelConfig& config() const { return cfg_; }
  int64_t layers() const { return static_cast<int64_t>(layers_.size()); }
  // The LM head and final norm, for drafters that put their own head on a hidden state.
  const kernels::WeightMatrix& lm_head() const { return output_; }
  const std::vector<float>& output_norm() const { return output_norm_; }
  const kernels::WeightMatrix& token_embedding() const { return token_embd_; }
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
