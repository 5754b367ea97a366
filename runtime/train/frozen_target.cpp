// Dequantized frozen target pieces and layer initialisation (see frozen_target.h).
#include "runtime/train/frozen_target.h"

#include <algorithm>

#include "kernels/cpu/rowops.h"
#include "runtime/core/error.h"

namespace ssd::train {
namespace {

// Dequantizes a [rows, cols] matrix (any weight type) into float, row by row.
std::vector<float> dequantize_matrix(const TensorRef& t) {
  const int64_t cols = static_cast<int64_t>(t.ne[0]), rows = static_cast<int64_t>(t.rows());
  std::vector<float> out(rows * cols);
  for (int64_t r = 0; r < rows; ++r)
    kernels::dequantize_row(t.type, t.data + r * t.row_bytes(), out.data() + r * cols, cols);
  return out;
}

}  // namespace

FrozenTarget::FrozenTarget(const ModelFile& model, std::vector<int32_t> draft_vocab) {
  const ModelConfig& c = model.config();
  dim_ = c.dim;
  vocab_ = c.vocab;
  emb_ = dequantize_matrix(*model.weights().token_embd);
  const TensorRef* out = model.weights().output;
  const bool tied = out == model.weights().token_embd || out->data == model.weights().token_embd->data;
  index_.assign(vocab_, -1);
  if (draft_vocab.empty())
    for (int32_t t = 0; t < vocab_; ++t) draft_vocab.push_back(t);
  head_ids_ = std::move(draft_vocab);
  for (size_t i = 0; i < head_ids_.size(); ++i) {
    const int32_t t = head_ids_[i];
    SSD_CHECK(t >= 0 && t < vocab_ && (i == 0 || t > head_ids_[i - 1]),
              "draft vocabulary: id {} at index {} is outside 0..{} or not increasing", t, i,
              vocab_ - 1);
    index_[t] = static_cast<int32_t>(i);
  }
  const bool full = static_cast<int64_t>(head_ids_.size()) == vocab_;
  if (tied && full) {
    head_ptr_ = emb_.data();
    return;
  }
  const std::vector<float> all = tied ? std::vector<float>() : dequantize_matrix(*out);
  const float* src = tied ? emb_.data() : all.data();
  head_.resize(head_ids_.size() * dim_);
  for (size_t i = 0; i < head_ids_.size(); ++i)
    std::copy_n(src + head_ids_[i] * dim_, dim_, head_.data() + i * dim_);
  head_ptr_ = head_.data();
}

bool copy_target_layer(const ModelFile& model, int64_t target_layer, const DominoConfig& cfg,
                       DominoView& p, int64_t l) {
  const ModelConfig& c = model.config();
  SSD_CHECK(target_layer >= 0 && target_layer < c.n_layers,
            "--init-layers: layer {} does not exist (the target has {} layers)", target_layer,
            c.n_layers);
  if (c.n_heads != cfg.n_heads || c.n_kv_heads != cfg.n_kv_heads || c.head_dim != cfg.head_dim ||
      c.ffn_dim != cfg.ffn_dim || c.rope_dim != c.head_dim || c.qkv_bias || c.qk_norm)
    return false;
  const LayerWeights& w = model.weights().layers[target_layer];
  const DominoView::Layer& dst = p.layers[l];
  auto copy = [](const TensorRef* t, float* out) {
    const std::vector<float> v = dequantize_matrix(*t);
    std::copy(v.begin(), v.end(), out);
  };
  // GGUF Llama stores Q/K rows of each head permuted for interleaved pairs: row 2i + j of a head
  // is Hugging Face row j * hd/2 + i. The drafter rotates halves (NeoX), so undo it.
  const bool unpermute = c.rope_layout == RopeLayout::Interleaved;
  auto copy_qk = [&](const TensorRef* t, float* out, int64_t heads) {
    const std::vector<float> v = dequantize_matrix(*t);
    const int64_t hd = c.head_dim, half = hd / 2, d = c.dim;
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t row = 0; row < hd; ++row) {
        const int64_t src = unpermute ? (row % half) * 2 + row / half : row;
        std::copy_n(v.data() + (h * hd + src) * d, d, out + (h * hd + row) * d);
      }
  };
  copy(w.attn_norm, dst.attn_norm);
  copy_qk(w.wq, dst.wq, c.n_heads);
  copy_qk(w.wk, dst.wk, c.n_kv_heads);
  copy(w.wv, dst.wv);
  copy(w.wo, dst.wo);
  copy(w.ffn_norm, dst.ffn_norm);
  copy(w.w_gate, dst.gate);
  copy(w.w_up, dst.up);
  copy(w.w_down, dst.down);
  return true;
}

bool copy_target_output_norm(const ModelFile& model, int64_t dim, float* out) {
  const TensorRef* norm = model.weights().output_norm;
  if (!norm || model.config().dim != dim || static_cast<int64_t>(norm->ne[0]) != dim) return false;
  kernels::dequantize_row(norm->type, norm->data, out, dim);
  return true;
}

}  // namespace ssd::train
