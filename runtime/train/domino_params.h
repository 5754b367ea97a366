// The trainable tensors of a Domino drafter as the trainer holds them: every tensor of the
// checkpoint (domino_tensor_specs, same names, shapes and order) in ONE flat float32 buffer, so
// gradients, AdamW moments and checkpoints are all "one buffer, same layout" and the optimiser is
// a single loop. DominoView resolves the named pointers once for the model code.
//
// float32 master weights on purpose (no bf16): training runs on CPUs with float32 GEMMs and the
// drafter is small (a few million parameters), so bf16 would save little memory and no time.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/drafters/domino/domino_checkpoint.h"
#include "runtime/drafters/domino/domino_config.h"

namespace ssd::train {

struct ParamTensor {
  std::string name;
  std::vector<uint64_t> shape;  // safetensors order (outermost first)
  int64_t offset = 0;           // into the flat buffer
  int64_t size = 0;
  bool decay = false;           // AdamW weight decay: matrices only (not norms, biases, MASK)
};

class ParamLayout {
 public:
  explicit ParamLayout(const DominoConfig& cfg);
  const std::vector<ParamTensor>& tensors() const { return tensors_; }
  int64_t total() const { return total_; }
  // Throws ssd::Error when the name is unknown.
  const ParamTensor& find(const std::string& name) const;

 private:
  std::vector<ParamTensor> tensors_;
  int64_t total_ = 0;
};

// Named pointers into one flat buffer (parameters or gradients) laid out by a ParamLayout.
template <class T>
struct DominoViewT {
  struct Layer {
    T* attn_norm; T* wq; T* wk; T* wv; T* wo; T* ffn_norm; T* gate; T* up; T* down;
  };
  T* fc;              // [d, F]
  T* fc_norm;         // [d]
  T* mask;            // [d]
  T* ctx_inject;      // [d, d] (null without context_inject)
  std::vector<Layer> layers;
  T* norm;            // [d]
  T* gru_w_ih;        // [3g, d]
  T* gru_w_hh;        // [3g, g]
  T* gru_b_ih;        // [3g]
  T* gru_b_hh;        // [3g]
  T* w1;              // [r, d + g]
  T* w2;              // [Vd, r]
};
using DominoView = DominoViewT<float>;
using DominoConstView = DominoViewT<const float>;

DominoView make_view(const ParamLayout& layout, const DominoConfig& cfg, float* base);
DominoConstView make_view(const ParamLayout& layout, const DominoConfig& cfg, const float* base);

}  // namespace ssd::train
