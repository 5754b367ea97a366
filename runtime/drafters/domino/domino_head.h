// The Domino head (the Domino paper): causal information injected into the block-parallel base
// logits at the cost of a small recurrent step per drafted position, instead of a full draft
// forward each.
//
//   s_0 = GRU(0, emb(anchor))                       emb = the target's token embedding  [d]
//   correction_i = W2 SiLU(W1 [h_i ; s_{i-1}])      W1 [r, d + g], W2 [V, r], no biases
//   final_i = base_i + correction_i                 i = 1..k, left to right
//   d_i = argmax(final_i) (greedy, q = one-hot), or q_i = process(final_i, sampler) and d_i drawn
//         from q_i with Philox(seed, stream, step + i - 1, kLaneDominoDraft) (q_i Saguaro-reshaped
//         first when the chain's request asks, see DominoChain::request)
//   s_i = GRU(s_{i-1}, emb(d_i))
//
// GRU convention: PyTorch nn.GRU (gate rows ordered reset | update | new):
//   r = sigmoid(W_ir x + b_ir + W_hr s + b_hr)
//   z = sigmoid(W_iz x + b_iz + W_hz s + b_hz)
//   n = tanh(W_in x + b_in + r * (W_hn s + b_hn))
//   s' = (1 - z) * n + z * s
//
// With the head off (--domino-head off) final_i = base_i: plain block-parallel drafting, which is
// how the head's effect on acceptance is measured. The walk is batched across chains: position i
// of every chain that reaches it is one matmul per weight.
//
// Two paths, one arithmetic (kernels/common/domino_math.h: the GRU unit, SiLU, base add, argmax
// rule): walk() runs op by op from host rows (every backend; the CPU's path); walk_fused() runs
// the whole walk of every chain as ONE backend op (Backend::domino_walk: the CUDA backend's fused
// kernel for greedy chains; for sampled ones a launch per position with the device sampler's
// kernels between, runtime/backend/cuda/domino_sampled_walk.h) on rows the backbone left in backend
// memory, so a block never returns to the host between positions. They differ only in the
// matmuls' summation order (and, for sampled chains over a draft vocabulary, in where top-p's
// cut falls at a rounding edge: see domino_sampled_walk.h).
#pragma once

#include <span>
#include <vector>

#include "runtime/drafters/domino/domino_checkpoint.h"
#include "runtime/model/transformer.h"
#include "runtime/spec/draft_tree.h"
#include "runtime/spec/drafter.h"

namespace ssd {

// The drafter's own Philox lane for its sampled draft tokens lives in sampler.h
// (kLaneDominoDraft), next to the verifier's lanes.

// One chain to walk: the backbone's outputs for MASK rows 1..k of one block.
struct DominoChain {
  const float* base = nullptr;    // [k, Vd] base logits (Vd = config's draft_vocab_size())
  const float* hidden = nullptr;  // [k, d] h_i after the backbone's final norm
  int32_t anchor = 0;             // the token before draft position 1
  int32_t k = 0;                  // tokens to draft
  SamplerConfig sampler;          // temperature 0 = greedy
  uint64_t stream = 0;
  uint32_t step = 0;              // Philox step of draft token 1
  // The request the chain drafts for, when its Saguaro options (saguaro_top_f / saguaro_c: q
  // reshaped before the draw, see runtime/saguaro/saguaro_sampling.h) and predict_top
  // (DraftTree::predicted) apply; null = neither.
  const DraftRequest* request = nullptr;
};

class DominoHead {
 public:
  // The checkpoint and the target must outlive the head.
  DominoHead(const DominoCheckpoint& ck, Transformer& target);
  DominoHead(const DominoHead&) = delete;
  DominoHead& operator=(const DominoHead&) = delete;

  // s <- GRU(s, emb(tokens[j])) for rows j < n.   s: [n, g]
  void gru_step(const int32_t* tokens, float* s, int64_t n);
  // logits[j] += W2 SiLU(W1 [h_j ; s_j]) for rows j < n.   h: [n, d], s: [n, g], logits: [n, Vd]
  void add_correction(const float* h, const float* s, float* logits, int64_t n);

  // Drafts one chain per input (DraftTree chains of k nodes with their q). use_head = false
  // drafts from the base logits alone. final_logits, when given, receives each chain's final
  // logits [k, V] over target ids (for tests and diagnostics; -inf outside a draft vocabulary).
  std::vector<DraftTree> walk(std::span<const DominoChain> chains, bool use_head,
                              std::vector<std::vector<float>>* final_logits = nullptr);

  // Whether the backend has the fused walk (walk_fused may be called).
  bool fused() const { return backend_.has_domino_walk(); }
  // Whether a chain can take the fused walk: greedy, or sampled without a Saguaro reshape (the
  // device draws from process(final) itself; a reshaped q is drawn on the host).
  static bool walks_fused(const SamplerConfig& sampler, const DraftRequest* request, int32_t k);
  // walk() for chains (walks_fused) whose rows are in backend memory: chain c's base logits
  // are rows offset[c] .. offset[c + 1] - 1 of `logits` ([rows, Vd], overwritten by the final
  // logits), its hidden states the same rows of `hidden` ([rows, d]); chains[c].k must be that
  // count and chains[c].base / hidden are not read. The final logits are downloaded (once,
  // after the walk) only for requests asking predict_top and for final_logits.
  std::vector<DraftTree> walk_fused(float* logits, const float* hidden,
                                    std::span<const int64_t> offset,
                                    std::span<const DominoChain> chains, bool use_head,
                                    std::vector<std::vector<float>>* final_logits = nullptr);

 private:
  const DominoConfig& cfg_;
  Backend& backend_;
  const Weight& token_embd_;  // the target's
  Weight w_ih_, w_hh_, w1_, w2_;
  std::vector<float> b_ih_, b_hh_;  // [3g]
  // For the fused walk (backend memory; allocated only when the backend has it).
  BackendBuffer b_ih_dev_, b_hh_dev_;  // [3g]
  BackendBuffer ids_dev_;              // [Vd] the draft vocabulary's target ids (when reduced)

  // Workspace.
  std::vector<float> emb_, gi_, gh_, in_, mid_, corr_;
  std::vector<float> full_;  // [V] one final row scattered back to target ids (draft vocab)

  // The row `row` ([Vd]) over target ids: itself, or scattered into full_ (-inf outside the
  // draft vocabulary).
  const float* target_row(const float* row);
};

}  // namespace ssd
