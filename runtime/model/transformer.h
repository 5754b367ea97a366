// The Llama-family transformer (pre-norm decoder blocks: RMSNorm -> GQA attention with RoPE ->
// residual -> RMSNorm -> SwiGLU MLP -> residual; final RMSNorm and LM head), written against the
// Backend interface. Its one entry point is forward(Batch): see batch.h for what a batch can be.
//
// Each block runs through run_decoder_layer (decoder_layer.h), where the tensor-parallel seam is
// marked.
#pragma once

#include <vector>

#include "runtime/backend/backend.h"
#include "runtime/model/batch.h"
#include "runtime/model/decoder_layer.h"
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
  void run(const Batch& b, KvCache& kv, const std::vector<int64_t>& cache_pos,
           const std::vector<int64_t>& prefix, ForwardResult& out);

  const ModelConfig& cfg_;
  Backend& backend_;
  kernels::WeightMatrix token_embd_, output_;
  std::vector<float> output_norm_;  // [dim]
  std::vector<float> inv_freq_;     // [rope_dim / 2]
  std::vector<DecoderLayerWeights> layers_;
  DecoderShape shape_;

  // Workspace, grown to the largest batch seen.
  std::vector<float> x_;  // [n, dim] residual stream
  DecoderScratch scratch_;
};

}  // namespace ssd
