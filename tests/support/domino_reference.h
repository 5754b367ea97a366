// A plain float64 Domino drafter for tests, written from the equations in
// runtime/drafters/domino/domino_{backbone,head}.h and independently of their code: no KV cache,
// no batching, no backend, every op straight from its definition. Weights are decoded with the
// kernels' scalar reference dequantizers, from the checkpoint and the target model as loaded.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/drafters/domino/domino_checkpoint.h"
#include "runtime/model/model_file.h"

namespace ssd::test {

class DominoReference {
 public:
  // Both must outlive the reference.
  DominoReference(const DominoCheckpoint& ck, const ModelFile& target);

  struct BlockOut {
    std::vector<std::vector<double>> hidden;  // [masks][d]  after the final norm, MASK rows 1..
    std::vector<std::vector<double>> logits;  // [masks][Vd] base logits (draft vocabulary)
  };
  // One block [known..., MASK x (B - 1)] after context features [n_ctx, F] (row-major floats).
  // with_inject = false leaves out the context_inject term (tests show it matters); masks >= 0
  // runs that many MASK rows instead of B - 1 (a trimmed block).
  BlockOut block(const std::vector<float>& features, const std::vector<int32_t>& known,
                 bool with_inject = true, int64_t masks = -1) const;

  struct WalkOut {
    std::vector<int32_t> tokens;              // [k] greedy choices (target ids)
    std::vector<std::vector<double>> logits;  // [k][V] final logits over target ids (-inf
                                              // outside a draft vocabulary)
  };
  // The head's walk from given float base logits [k, Vd] and hidden states [k, d]: greedy, or
  // feeding the GRU the `forced` tokens (e.g. a sampled draft) while still reporting the argmax.
  WalkOut walk(const float* base, const float* hidden, int32_t anchor, int32_t k,
               const std::vector<int32_t>* forced = nullptr) const;

 private:
  using Mat = std::vector<std::vector<double>>;  // [rows][cols]
  struct Layer {
    Mat wq, wk, wv, wo, gate, up, down;
    std::vector<double> attn_norm, ffn_norm;
  };
  const DominoConfig& cfg_;
  Mat fc_, embd_, lm_head_, w_ih_, w_hh_, w1_, w2_, inject_;  // inject_ empty without it
  std::vector<double> fc_norm_, mask_, final_norm_, b_ih_, b_hh_;
  std::vector<Layer> layers_;
};

}  // namespace ssd::test
