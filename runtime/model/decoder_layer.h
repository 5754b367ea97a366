// One pre-norm Llama decoder block over a batch: RMSNorm -> Q/K/V (+bias, +per-head norm,
// RoPE) -> K/V into the cache -> attention with the caller's visibility -> o_proj -> residual ->
// RMSNorm -> SwiGLU MLP -> residual. The target transformer and the Domino backbone both run
// their layers through this one function, so a fix or a faster path lands in both.
//
// Tensor-parallel seam: with heads and MLP columns split per rank, the all-reduces go after the
// o_proj and after the down_proj matmuls (marked in decoder_layer.cpp).
#pragma once

#include <vector>

#include "runtime/backend/backend.h"
#include "runtime/model/model_weights.h"

namespace ssd {

struct DecoderLayerWeights {
  kernels::WeightMatrix wq, wk, wv, wo, w_gate, w_up, w_down;
  std::vector<float> attn_norm, ffn_norm;  // [dim]
  std::vector<float> bq, bk, bv;           // [n_heads*head_dim], [kv*head_dim] x2; empty if none
  std::vector<float> q_norm, k_norm;       // [head_dim]; empty if none
};

struct DecoderShape {
  int64_t dim = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0, rope_dim = 0, ffn_dim = 0;
  float rms_eps = 1e-5f;
  kernels::RopeLayout rope_layout = kernels::RopeLayout::NeoX;
  const float* inv_freq = nullptr;  // [rope_dim / 2]
};

// What each batch row is and sees (see AttentionCall in backend.h): row i has RoPE position
// positions[i], its K/V go to (seqs[i], cache_pos[i]), and it attends to its sequence's
// positions [0, prefix[i]) plus visible[offsets[i] .. offsets[i+1]).
struct BatchView {
  int64_t n = 0;
  const int32_t* positions = nullptr;
  const SeqId* seqs = nullptr;
  const int64_t* cache_pos = nullptr;
  const int64_t* prefix = nullptr;
  const int64_t* visible = nullptr;
  const int64_t* offsets = nullptr;
};

// Activation buffers of one batch, grown to the largest batch seen (one per model instance).
struct DecoderScratch {
  std::vector<float> h, q, k, v, attn, o, gate, up;
  void reserve(int64_t n, const DecoderShape& s);
};

// x: [n, dim], updated in place. Layer `layer` of `kv` receives the batch's K/V.
void run_decoder_layer(Backend& backend, const DecoderLayerWeights& w, const DecoderShape& s,
                       int64_t layer, KvCache& kv, const BatchView& b, float* x,
                       DecoderScratch& scratch);

// K/V only: from the already normed inputs hn [n, dim] (no attention, no MLP), written to the
// cache. Used for context entries that are not tokens (Domino's projected target features).
void store_layer_kv(Backend& backend, const DecoderLayerWeights& w, const DecoderShape& s,
                    int64_t layer, KvCache& kv, const BatchView& b, const float* hn,
                    DecoderScratch& scratch);

// Small 1-D parameters (norm gains, biases) decoded to float; empty for a null tensor.
std::vector<float> decode_vector(const TensorRef* t);

// A layer's file tensors made ready for `backend`: matrices prepared, vectors decoded. Optional
// tensors (biases, Q/K norms) that are null stay empty.
DecoderLayerWeights prepare_decoder_layer(Backend& backend, const LayerWeights& t);

}  // namespace ssd
