// The Llama-family transformer (pre-norm decoder blocks: RMSNorm -> GQA attention with RoPE ->
// residual -> RMSNorm -> SwiGLU MLP -> residual; final RMSNorm and LM head), written against the
// Backend interface. Its one entry point is forward(Batch): see batch.h for what a batch can be.
//
// Each block runs through run_decoder_layer (decoder_layer.h). The activations live in the
// backend's memory (Backend::allocate); a forward's only transfers to the host are the named
// downloads of the logits rows and of the hidden layers the batch asks for (and, under TP, the
// exchanges, which run on host buffers).
//
// Tensor parallelism, when constructed with a TpContext: this object is one rank of a group of
// T, holding only its shard of the weights (runtime/parallel/tp_weights.h): its query heads and
// the KV heads they read (column-parallel Q/K/V), its ffn columns (column-parallel gate/up), its
// share of o_proj and down_proj (in the layout of TpContext::mode, runtime/parallel/tp_plan.h:
// "exact", the default, keeps every logit bit-identical to T = 1; "megatron" all-reduces partial
// sums), its rows of the LM head; embeddings and norms are replicated. Its KV cache holds only
// its KV heads (kv_config()). Every rank of the group calls forward() with the same Batch, in the
// same order (the calls are collectives: the block's exchanges, one gather for the logits);
// every rank returns the same ForwardResult, the same shape and values, and hidden_layers are the
// whole hidden states (after the exchanges), so drafters fed with target features work unchanged.
//
// The LM head is vocab-parallel (each rank multiplies by its vocab rows, the logits rows are
// all-gathered), not a replicated head on the gathered hidden state. The hidden state is already
// whole on every rank after the last block's exchange, so a replicated head would need no
// traffic, but every rank would then read the whole [vocab, dim] matrix per forward: for
// SmolLM2-135M the tied 49152 x 576 Q8_0 head is 30 MB against 66 MB for all 30 blocks, so at
// T = 4 each rank would read 16.5 + 30 MB instead of 16.5 + 7.5, and the head would cap the
// speed-up near 2x. The price of splitting it is one gather of rows x vocab floats (196 KB per
// logits row here), which every rank needs anyway since every rank samples and verifies in
// lockstep. (A distributed argmax / top-k over the shards would move less, but the samplers and
// verifiers take whole rows.)
#pragma once

#include <optional>
#include <vector>

#include "runtime/backend/backend.h"
#include "runtime/model/batch.h"
#include "runtime/model/decoder_layer.h"
#include "runtime/model/model_file.h"
#include "runtime/parallel/tp_context.h"
#include "runtime/parallel/tp_weights.h"

namespace ssd {

class Transformer {
 public:
  // The model file must outlive the transformer (weights stay in its mapping). `layers` > 0 runs
  // only the first `layers` blocks (early-exit self-speculation shares the target's weights this
  // way); the LM head then applies to block layers-1's output.
  Transformer(const ModelFile& model, Backend& backend, int64_t layers = 0);
  // One rank of a tensor-parallel group (see above). Collective: every rank of tp.comm's group
  // constructs its Transformer at the same time; they check that they run the same model and
  // that their shards tile it (check_tp_group), and all throw if not.
  Transformer(const ModelFile& model, Backend& backend, const TpContext& tp, int64_t layers = 0);
  Transformer(const Transformer&) = delete;
  Transformer& operator=(const Transformer&) = delete;

  const ModelConfig& config() const { return cfg_; }
  // The model file the weights come from: host bytes, for a drafter that repacks a weight (the
  // prepared WeightMatrix data may live on a device, see Backend::prepare_weight).
  const ModelFile& file() const { return file_; }
  int64_t layers() const { return static_cast<int64_t>(layers_.size()); }
  // The LM head and final norm, for drafters that put their own head on a hidden state. Under
  // TP the head is this rank's vocab rows only (tp()->shard.vocab_begin ..).
  const Weight& lm_head() const { return output_; }
  const std::vector<float>& output_norm() const { return output_norm_; }
  const Weight& token_embedding() const { return token_embd_; }
  Backend& backend() { return backend_; }
  // The TP context this rank runs with; null for a whole model on one rank.
  const TpContext* tp() const { return tp_ ? &*tp_ : nullptr; }
  // A cache shaped for this model (under TP: this rank's KV heads) holding up to max_tokens
  // positions over all sequences.
  KvCacheConfig kv_config(int64_t max_tokens) const;

  // Runs the batch, appending its K/V to the cache. On any error the cache is rolled back to the
  // lengths it had before the call, and ssd::Error is thrown.
  ForwardResult forward(const Batch& batch, KvCache& kv);

 private:
  Transformer(const ModelFile& model, Backend& backend, int64_t layers, const TpContext* tp);
  void run(const Batch& b, KvCache& kv, const std::vector<int64_t>& cache_pos,
           const std::vector<int64_t>& prefix, ForwardResult& out);

  const ModelFile& file_;
  const ModelConfig& cfg_;
  Backend& backend_;
  Weight token_embd_, output_;
  std::vector<float> output_norm_;  // [dim]
  std::vector<float> inv_freq_;     // [rope_dim / 2]
  std::vector<DecoderLayerWeights> layers_;
  DecoderShape shape_;  // under TP: local heads and ffn columns

  // Tensor parallelism (all empty without it).
  std::optional<TpContext> tp_;
  TpWeightBuffers tp_buffers_;          // Megatron: this rank's column slices of wo, w_down
  DecoderTp block_tp_;                  // what run_decoder_layer exchanges, and with whom
  std::vector<int64_t> vocab_offsets_;  // [T + 1] LM-head rows of each rank
  BackendBuffer tp_logits_;             // [rows, vocab] the gathered logits rows
  BackendBuffer tp_head_xchg_;          // [rows, vocab] their exchange's scratch

  // Workspace in the backend's memory (device memory on a GPU), grown to the largest batch
  // seen. A forward reads back only the logits rows and the hidden layers asked for.
  BackendBuffer x_;       // [n, dim] residual stream
  BackendBuffer logits_;  // [rows, this rank's vocab rows]
  BackendBuffer hidden_;  // [hidden layers, n, dim] the batch's requested hidden layers
  DecoderScratch scratch_;
};

}  // namespace ssd
