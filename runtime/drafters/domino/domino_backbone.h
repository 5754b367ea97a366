// The block-parallel backbone of a Domino drafter (DFlash-style): one batched pass drafts every
// position of a block at once from the target's context features.
//
// Context. For each context position j whose target features x_j ([F] = the target's hidden
// states at target_layers, concatenated) are known: c_j = RMSNorm(W_fc x_j) * fc_norm  ([d]).
// c_j does not go through the layers; instead every layer l turns it into K/V entries with its
// own projections, k = RoPE_j(W_k^l RMSNorm(c_j) * attn_norm^l), v = W_v^l (same normed input),
// stored at cache position j. They are computed ONCE when the features arrive (append_context)
// and kept in the drafter's KvCache, so a draft never recomputes the context.
//
// Block. [known tokens..., MASK x (B - 1)] (or MASK x n_out when trimmed: the rows past the last
// wanted draft only feed attention, and dropping them cuts the pass's cost by up to half at
// k = B/2 for a small change of the drafts): normally one known token, the anchor (the last
// emitted token, whose features do not exist yet). Known tokens enter as the target's token
// embeddings, MASK as the learned mask_embedding. With context_inject (domino_config.h) every row
// of the block also gets u = W_inject c_{n_ctx-1}, the last visible context entry projected;
// append_context hands those u rows back so the caller keeps them with its sequence. The rows run through Llama decoder layers
// (attn_norm, GQA attention, o_proj, residual, ffn_norm, SwiGLU, residual); in attention every
// block row sees ALL the visible context entries and the WHOLE block (bidirectional). RoPE
// positions: context j at j; block row t at n_ctx + t (so the anchor sits at root_pos and MASK i
// at root_pos + i, where it predicts the token of position root_pos + i).
//
// Output per block, for MASK rows i = 1..n_out: h_i = RMSNorm(x_i) * norm (the drafter's final
// norm) and base_i = LM_head_target(h_i), over the draft vocabulary when the config has one (the
// target's LM head rows of those ids, copied once in the target's own dtype, so each logit is
// bit-identical to the full head's for that id).
//
// Several blocks (many requests, or many hypothetical suffixes of one sequence) run in ONE pass:
// each block gets a fork of its sequence's context (shared pages, no copy), its rows are appended
// to the fork, and the fork is released afterwards, so the context is never modified by a draft.
// A pass is one replayable region (Backend::begin_replayable) keyed by its shape (rows, each
// block's known rows and outputs): on CUDA a repeated shape replays as a graph.
#pragma once

#include <span>
#include <vector>

#include "runtime/drafters/domino/domino_checkpoint.h"
#include "runtime/model/decoder_layer.h"
#include "runtime/model/transformer.h"

namespace ssd {

class DominoBackbone {
 public:
  // The checkpoint and the target must outlive the backbone (weights are used in place).
  DominoBackbone(const DominoCheckpoint& ck, Transformer& target);
  DominoBackbone(const DominoBackbone&) = delete;
  DominoBackbone& operator=(const DominoBackbone&) = delete;

  const DominoConfig& config() const { return cfg_; }
  // A cache shaped for the backbone's layers holding up to max_tokens positions in total.
  KvCacheConfig kv_config(int64_t max_tokens) const;

  // Appends the context entries of positions [from, from + n) to `seq`, whose length must be
  // `from`. features: [n, F] row-major (layer blocks in target_layers order). With
  // context_inject, `inject` (required then) receives the rows u_j = W_inject c_j, [n, d].
  void append_context(KvCache& kv, SeqId seq, int64_t from, std::span<const float> features,
                      std::vector<float>* inject = nullptr);

  struct Block {
    SeqId seq = -1;              // the sequence holding the context entries
    int64_t n_ctx = 0;           // context entries visible: positions [0, n_ctx) (<= length)
    std::vector<int32_t> known;  // tokens at positions n_ctx, n_ctx + 1, ...; the anchor is last
    int32_t n_out = 0;           // MASK rows wanted: 1..n_out (0 <= n_out <= B - 1)
    const float* inject = nullptr;  // [d] u_{n_ctx-1} from append_context (context_inject and
                                    // n_ctx > 0; null otherwise)
    bool trim = false;  // n_out MASK rows instead of the trained B - 1 (a cheaper pass)
  };
  struct Result {
    std::vector<float> hidden;    // [rows, d]  h_i after the final norm
    std::vector<float> logits;    // [rows, Vd] base logits (Vd = config().draft_vocab_size())
    std::vector<int64_t> offset;  // [blocks + 1]: block b owns rows offset[b] .. offset[b+1]-1
    // The same rows in the backend's memory, valid until the backbone's next call (the fused
    // head walk reads them there and overwrites dev_logits with the final logits).
    float* dev_logits = nullptr;        // [rows, Vd]
    const float* dev_hidden = nullptr;  // [rows, d]
  };
  // download = false leaves hidden and logits empty (the rows stay in backend memory only).
  Result forward(KvCache& kv, std::span<const Block> blocks, bool download = true);

 private:

  const DominoConfig& cfg_;
  Backend& backend_;
  const Weight& token_embd_;  // the target's
  Weight lm_head_;            // the target's, or its draft-vocabulary rows
  std::vector<uint8_t> lm_head_rows_;        // [Vd, row_bytes]: those rows (draft vocab only)
  Weight fc_;
  Weight inject_;  // [d, d] ctx_inject.weight (context_inject only)
  std::vector<float> fc_norm_, mask_, final_norm_;  // [d]
  std::vector<float> inv_freq_;                     // [head_dim / 2]
  std::vector<DecoderLayerWeights> layers_;  // run through run_decoder_layer, as the target's
  DecoderShape shape_;

  BackendBuffer mask_dev_;  // [d] mask_ in the backend's memory (copied into MASK rows)

  // Workspace in the backend's memory (device memory on a GPU), grown to the largest pass seen;
  // a pass reads back only its hidden and logits rows.
  BackendBuffer x_, h_;   // [rows, d]
  BackendBuffer feats_;   // [rows, feature_dim] context features (append_context)
  BackendBuffer logits_;  // [out rows, Vd]
  DecoderScratch scratch_;
};

}  // namespace ssd
