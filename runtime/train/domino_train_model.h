// The Domino drafter's training forward and backward, written to
// equal the inference drafter (domino_backbone.h, domino_head.h) op for op:
//
// One sequence t[0, L) with target features X [L, F] and A anchors a (P-1 <= a <= L-2), each
// block with kn = LossOptions::known known tokens (1 = the anchor alone; more = the SSD
// pre-speculation shape [accepted..., bonus, MASK...], whose known tokens have no features yet).
// Below, "context [0, a)" and "rows [emb(t[a]), ...]" are for kn = 1; in general the context is
// [0, a-kn+1) and the rows are [emb(t[a-kn+1]) .. emb(t[a]), mask x (B-1)] at positions a-kn+1 ..;
// draft i is still the MASK row at position a+i and the GRU still starts from the anchor t[a].
//   context:  c_j = RMSNorm(W_fc X_j) * fc_norm; per layer l, from hn = RMSNorm(c_j) * attn_norm^l:
//             k_j = RoPE_j(W_k^l hn), v_j = W_v^l hn. Computed ONCE per sequence for j < max(a);
//             the block of anchor a sees entries [0, a).
//   block:    rows [emb(t[a]), mask x (B-1)] at positions a .. a+B-1 through the Llama layers
//             (attention over [context [0, a) ; the whole block]). With context_inject every row
//             also gets W_inject c_{a-1} added to its input (nothing when a == 0).
//   output:   h_i = RMSNorm(x_i) * norm, base_i = h_i E^T (E = the target's frozen LM head rows of
//             the draft vocabulary), i = 1 .. nv, nv = min(B-1, L-1-a) (rows with a label).
//   head:     s_0 = GRU(0, emb(t[a])); final_i = base_i + W2 SiLU(W1 [h_i ; s_{i-1}]);
//             s_i = GRU(s_{i-1}, emb(y_i)), y_i = t[a+i] (teacher forcing) or argmax(final_i)
//             (sampled, "training-time testing"; no gradient through the argmax).
//   loss:     per block sum_i w_i [(1-lambda) CE(final_i, y_i) + lambda CE(base_i, y_i)] / sum_i w_i
//             over rows whose label is in the draft vocabulary (others are "oov", no loss),
//             w_i = exp(-(i-1)/gamma).
//
// run() does the forward and, when given gradient buffers, the backward of loss_scale * (sum of
// the blocks' losses), ADDING into them. All blocks of the sequence are batched: row-wise ops run
// on [A*B, d], attention per block, the head per draft position over the blocks that reach it.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "runtime/train/domino_params.h"
#include "runtime/train/frozen_target.h"
#include "runtime/train/ops_gru.h"

namespace ssd::train {

enum class HeadInputs { Teacher, Sampled };

struct LossOptions {
  float lambda = 1.0f;      // weight of the base CE (curriculum)
  float gamma = 7.0f;       // position-weight decay
  HeadInputs head_inputs = HeadInputs::Teacher;
  float loss_scale = 1.0f;  // the gradient is of loss_scale * sum over blocks
  int32_t known = 1;        // known tokens per block (anchors must be >= known - 1)
};

// Sums over blocks (divide by blocks for means).
struct LossStats {
  double loss = 0, ce_final = 0, ce_base = 0;
  int64_t blocks = 0;                    // blocks with at least one in-vocabulary label
  int64_t acc1_hits = 0, acc1_total = 0; // block position 1: argmax(final_1) == y_1
  int64_t labels = 0, oov = 0;           // labelled rows; of them outside the draft vocabulary
  int64_t tokens = 0;                    // block rows processed (A * B per sequence)
  void add(const LossStats& o);
};

class DominoTrainModel {
 public:
  DominoTrainModel(const DominoConfig& cfg, const FrozenTarget& target);

  // tokens [L], features [L, F], anchors: each in [0, L-2]. grads null = forward only.
  LossStats run(const DominoConstView& p, DominoView* grads, std::span<const int32_t> tokens,
                std::span<const float> features, std::span<const int32_t> anchors,
                const LossOptions& opt);

  // After run() with keep_logits(true): the block's base and final logits rows [nv, Vd] and h
  // [nv, d] of anchor index b (tests compare them with the inference drafter).
  void keep_logits(bool on) { keep_ = on; }
  struct BlockOut {
    std::vector<float> base, final_logits, hidden;
    int64_t rows = 0;
  };
  BlockOut block_out(int64_t b) const;

  // Approximate FLOPs of run() with gradients for one sequence of n_ctx context rows and A
  // anchors (for the start-of-run estimate).
  double flops(int64_t n_ctx, int64_t anchors, int64_t avg_ctx) const;

 private:
  struct LayerCache {
    std::vector<float> hn, rstd_hn, kc, vc;  // context: [n, d], [n], [n, KV], [n, KV]
    std::vector<float> xin, rstd1, h1, q, k, v, att, xmid, rstd2, h2, gate, up, act;
    std::vector<std::vector<float>> probs;   // per block
  };
  void forward(const DominoConstView& p, std::span<const int32_t> tokens,
               std::span<const float> features, std::span<const int32_t> anchors,
               const LossOptions& opt, bool grad, LossStats& st);
  void plan_blocks(std::span<const int32_t> anchors, int64_t known);
  void forward_context(const DominoConstView& p, std::span<const float> features);
  void forward_block_inputs(const DominoConstView& p, std::span<const int32_t> tokens,
                            std::span<const int32_t> anchors);
  void forward_backbone(const DominoConstView& p);
  std::vector<float> labelled_base_logits();
  void forward_head(const DominoConstView& p, std::span<const int32_t> tokens,
                    std::span<const int32_t> anchors, const LossOptions& opt, bool grad,
                    const std::vector<float>& base, LossStats& st);
  void backward(const DominoConstView& p, DominoView& g, std::span<const float> features);

  const DominoConfig& cfg_;
  const FrozenTarget& target_;
  std::vector<float> inv_freq_;
  bool keep_ = false;

  // Forward state of the last run.
  int64_t n_ctx_ = 0, rows_ = 0, nblocks_ = 0, max_nv_ = 0;
  int64_t kn_ = 1, rb_ = 0;          // known tokens per block; rows per block (kn + B - 1)
  std::vector<int32_t> ctx_of_;      // [A] context entries block b sees (a - kn + 1)
  std::vector<int32_t> ctx_pos_, pos_, nv_;
  std::vector<float> pre_, c_, rstd_c_, x0_, xl_, hfin_, rstd_f_;
  std::vector<float> clast_;  // [A, d] last visible context entry of each block (context_inject;
                              // zero when the block sees no context)
  std::vector<uint8_t> is_mask_;
  std::vector<LayerCache> layers_;
  // Head, rows in position-major order m: for i = 1..max_nv, blocks with nv >= i.
  std::vector<int64_t> m_first_;               // [max_nv + 2] first m of position i
  std::vector<int32_t> m_block_;               // [M] block of row m
  std::vector<float> hsel_, in_, mlin_, u_;    // [M, d], [M, d+g], [M, r], [M, r]
  std::vector<float> dfinal_, dbase_;          // [M, Vd]
  std::vector<float> base_keep_, final_keep_;  // [M, Vd] (keep_logits only)
  std::vector<GruStepCache> gru_;              // step j: rows = blocks of position j + 1
  std::vector<float> states_;                  // [max_nv, A, g]: s_j of block b
};

}  // namespace ssd::train
