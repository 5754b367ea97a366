// Flat parameter layout of a Domino drafter (see domino_params.h).
#include "runtime/train/domino_params.h"

#include <fmt/format.h>

#include "runtime/core/error.h"

namespace ssd::train {

ParamLayout::ParamLayout(const DominoConfig& cfg) {
  for (const DominoTensorSpec& s : domino_tensor_specs(cfg)) {
    ParamTensor t;
    t.name = s.name;
    t.shape = s.shape;
    t.offset = total_;
    t.size = 1;
    for (uint64_t d : s.shape) t.size *= static_cast<int64_t>(d);
    t.decay = s.shape.size() == 2;
    total_ += t.size;
    tensors_.push_back(std::move(t));
  }
}

const ParamTensor& ParamLayout::find(const std::string& name) const {
  for (const ParamTensor& t : tensors_)
    if (t.name == name) return t;
  fail(fmt::format("domino trainer: no parameter tensor named '{}'", name));
}

namespace {

template <class T>
DominoViewT<T> view_of(const ParamLayout& L, const DominoConfig& cfg, T* base) {
  auto at = [&](const std::string& n) { return base + L.find(n).offset; };
  DominoViewT<T> v;
  v.fc = at("fc.weight");
  v.fc_norm = at("fc_norm.weight");
  v.mask = at("mask_embedding");
  v.ctx_inject = cfg.context_inject ? at("ctx_inject.weight") : nullptr;
  v.norm = at("norm.weight");
  for (int32_t l = 0; l < cfg.n_layers; ++l) {
    const std::string p = fmt::format("layers.{}.", l);
    v.layers.push_back({at(p + "input_layernorm.weight"), at(p + "self_attn.q_proj.weight"),
                        at(p + "self_attn.k_proj.weight"), at(p + "self_attn.v_proj.weight"),
                        at(p + "self_attn.o_proj.weight"), at(p + "post_attention_layernorm.weight"),
                        at(p + "mlp.gate_proj.weight"), at(p + "mlp.up_proj.weight"),
                        at(p + "mlp.down_proj.weight")});
  }
  v.gru_w_ih = at("head.gru.weight_ih");
  v.gru_w_hh = at("head.gru.weight_hh");
  v.gru_b_ih = at("head.gru.bias_ih");
  v.gru_b_hh = at("head.gru.bias_hh");
  v.w1 = at("head.w1.weight");
  v.w2 = at("head.w2.weight");
  return v;
}

}  // namespace

DominoView make_view(const ParamLayout& L, const DominoConfig& cfg, float* base) {
  return view_of(L, cfg, base);
}
DominoConstView make_view(const ParamLayout& L, const DominoConfig& cfg, const float* base) {
  return view_of(L, cfg, base);
}

}  // namespace ssd::train
