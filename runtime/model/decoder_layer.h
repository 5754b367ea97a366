// One pre-norm Llama decoder block over a batch: RMSNorm -> Q/K/V (+bias, +per-head norm,
// RoPE) -> K/V into the cache -> attention with the caller's visibility -> o_proj -> residual ->
// RMSNorm -> SwiGLU MLP -> residual. The target transformer and the Domino backbone both run
// their layers through this one function, so a fix or a faster path lands in both.
//
// Tensor parallelism: on a TP rank the weights are the rank's shard (runtime/parallel/
// tp_weights.h: its query/KV heads, its ffn columns, in the exact layout its o_proj/down_proj
// output rows) and the shape counts local heads and ffn columns. The block is the same code plus
// the exchanges of the layout (runtime/parallel/tp_plan.h), so that the residual stream x is
// whole and identical on every rank between blocks:
//   Megatron  o_proj and down_proj multiply the rank's columns; their partial outputs are
//             all-reduced (two all-reduces per block);
//   Exact     the attention output and the MLP activation are all-gathered, o_proj and down_proj
//             compute the rank's output rows from the whole input, and those rows are all-gathered
//             (four all-gathers per block; every value computed as at T = 1).
// Without a DecoderTp the block is exactly the single-rank one.
#pragma once

#include <vector>

#include "runtime/backend/backend.h"
#include "runtime/model/model_weights.h"
#include "runtime/parallel/collective.h"
#include "runtime/parallel/tp_plan.h"

namespace ssd {

struct DecoderLayerWeights {
  Weight wq, wk, wv, wo, w_gate, w_up, w_down;
  std::vector<float> attn_norm, ffn_norm;  // [dim]
  std::vector<float> bq, bk, bv;           // [n_heads*head_dim], [kv*head_dim] x2; empty if none
  std::vector<float> q_norm, k_norm;       // [head_dim]; empty if none
};

struct DecoderShape {
  int64_t dim = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0, rope_dim = 0, ffn_dim = 0;
  float rms_eps = 1e-5f;
  RopeLayout rope_layout = RopeLayout::NeoX;
  const float* inv_freq = nullptr;  // [rope_dim / 2]
  // KV head read by each query head, [n_heads]; null = the usual GQA grouping. A TP rank's
  // heads may straddle GQA groups (AttentionCall::kv_head_of).
  const int32_t* kv_head_of = nullptr;
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

// A TP rank's exchanges in the block (see the top of this file). Offsets are [T + 1] per rank,
// rank r holding [off[r], off[r+1]); the exact layout gathers along them (Megatron reads only
// out_rows.back(), the width it all-reduces).
struct DecoderTp {
  Collective* comm = nullptr;
  TpMode mode = TpMode::Exact;
  std::vector<int64_t> attn_cols;  // attention output columns (heads x head_dim)
  std::vector<int64_t> ffn_cols;   // MLP activation columns
  std::vector<int64_t> out_rows;   // o_proj / down_proj output rows (of dim)
};

// Activation buffers of one batch in the backend's memory (device memory on a GPU), grown to
// the largest batch seen (one per model instance).
struct DecoderScratch {
  BackendBuffer h;           // [n, dim] normed input
  BackendBuffer q, attn;     // [n, n_heads * head_dim]
  BackendBuffer k, v;        // [n, n_kv_heads * head_dim]
  BackendBuffer o;           // [n, dim] projection output
  BackendBuffer gate, up;    // [n, ffn_dim]
  BackendBuffer whole, part; // exact TP: gathered input [n, in cols], own output rows
  BackendBuffer xchg;        // TP: the exchanges' scratch (Backend::allreduce_sum /
                             // gather_columns): [n, max(T * dim, widest gathered matrix)]
  // Grows every buffer a batch of n rows needs (with tp, the exchanges' too), so that a forward
  // allocates nothing after it (replayable regions may not).
  void reserve(Backend& be, int64_t n, const DecoderShape& s, const DecoderTp* tp = nullptr);
};

// x: [n, dim], updated in place. Layer `layer` of `kv` receives the batch's K/V. With `tp`, the
// weights and shape are this rank's shard and the call is a collective of the group (every rank
// makes the same call); x comes out whole and the same on every rank.
void run_decoder_layer(Backend& backend, const DecoderLayerWeights& w, const DecoderShape& s,
                       int64_t layer, KvCache& kv, const BatchView& b, float* x,
                       DecoderScratch& scratch, const DecoderTp* tp = nullptr);

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
