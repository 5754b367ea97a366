// Opening a Domino checkpoint: the config first (every shape follows from it), then each expected
// tensor by name with its exact shape, so a user learns which tensor of which file is wrong
// before a single token is drafted.
#include "runtime/drafters/domino/domino_checkpoint.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>

#include "kernels/cpu/rowops.h"
#include "runtime/core/error.h"

namespace ssd {
namespace {

std::string shape_str(const std::vector<uint64_t>& s) { return fmt::format("[{}]", fmt::join(s, ", ")); }

}  // namespace

std::vector<DominoTensorSpec> domino_tensor_specs(const DominoConfig& c) {
  const uint64_t d = c.target_dim, f = c.feature_dim(), h = uint64_t(c.n_heads) * c.head_dim,
                 kv = uint64_t(c.n_kv_heads) * c.head_dim, ffn = c.ffn_dim, g = c.gru_dim,
                 r = c.rank, v = c.draft_vocab_size();
  std::vector<DominoTensorSpec> s = {
      {"fc.weight", {d, f}}, {"fc_norm.weight", {d}}, {"mask_embedding", {d}}};
  if (c.context_inject) s.push_back({"ctx_inject.weight", {d, d}});
  for (int32_t l = 0; l < c.n_layers; ++l) {
    const std::string p = fmt::format("layers.{}.", l);
    s.push_back({p + "input_layernorm.weight", {d}});
    s.push_back({p + "self_attn.q_proj.weight", {h, d}});
    s.push_back({p + "self_attn.k_proj.weight", {kv, d}});
    s.push_back({p + "self_attn.v_proj.weight", {kv, d}});
    s.push_back({p + "self_attn.o_proj.weight", {d, h}});
    s.push_back({p + "post_attention_layernorm.weight", {d}});
    s.push_back({p + "mlp.gate_proj.weight", {ffn, d}});
    s.push_back({p + "mlp.up_proj.weight", {ffn, d}});
    s.push_back({p + "mlp.down_proj.weight", {d, ffn}});
  }
  s.push_back({"norm.weight", {d}});
  s.push_back({"head.gru.weight_ih", {3 * g, d}});
  s.push_back({"head.gru.weight_hh", {3 * g, g}});
  s.push_back({"head.gru.bias_ih", {3 * g}});
  s.push_back({"head.gru.bias_hh", {3 * g}});
  s.push_back({"head.w1.weight", {r, d + g}});
  s.push_back({"head.w2.weight", {v, r}});
  return s;
}

DominoCheckpoint DominoCheckpoint::open(const std::string& path) {
  DominoCheckpoint ck;
  ck.path_ = path;
  ck.file_ = std::make_unique<SafetensorsModel>(SafetensorsModel::open(path));
  const auto& meta = ck.file_->metadata();
  auto it = meta.find("domino_config");
  SSD_CHECK(it != meta.end(),
            "{}: not a Domino checkpoint: the safetensors \"__metadata__\" has no "
            "\"domino_config\" entry",
            path);
  ck.cfg_ = DominoConfig::from_json(it->second, path);

  std::map<std::string, const TensorRef*> found;
  for (const DominoTensorSpec& spec : domino_tensor_specs(ck.cfg_)) {
    const TensorRef* t = ck.file_->find_tensor(spec.name);
    SSD_CHECK(t, "{}: missing tensor '{}' (expected shape {})", path, spec.name,
              shape_str(spec.shape));
    std::vector<uint64_t> shape(t->ne.rbegin(), t->ne.rend());  // back to outermost first
    SSD_CHECK(shape == spec.shape, "{}: tensor '{}' has shape {}, expected {} from domino_config",
              path, spec.name, shape_str(shape), shape_str(spec.shape));
    SSD_CHECK(t->type == DType::F32 || t->type == DType::F16 || t->type == DType::BF16,
              "{}: tensor '{}' has dtype {}; Domino checkpoints use F32, F16 or BF16", path,
              spec.name, dtype_name(t->type));
    found[spec.name] = t;
  }
  for (const TensorRef& t : ck.file_->tensors())
    SSD_CHECK(found.count(t.name), "{}: unexpected tensor '{}' (not part of the Domino format)",
              path, t.name);

  ck.fc = found.at("fc.weight");
  ck.fc_norm = found.at("fc_norm.weight");
  ck.mask_embedding = found.at("mask_embedding");
  if (ck.cfg_.context_inject) ck.ctx_inject = found.at("ctx_inject.weight");
  ck.final_norm = found.at("norm.weight");
  for (int32_t l = 0; l < ck.cfg_.n_layers; ++l) {
    const std::string p = fmt::format("layers.{}.", l);
    DominoLayerTensors L;
    L.attn_norm = found.at(p + "input_layernorm.weight");
    L.wq = found.at(p + "self_attn.q_proj.weight");
    L.wk = found.at(p + "self_attn.k_proj.weight");
    L.wv = found.at(p + "self_attn.v_proj.weight");
    L.wo = found.at(p + "self_attn.o_proj.weight");
    L.ffn_norm = found.at(p + "post_attention_layernorm.weight");
    L.w_gate = found.at(p + "mlp.gate_proj.weight");
    L.w_up = found.at(p + "mlp.up_proj.weight");
    L.w_down = found.at(p + "mlp.down_proj.weight");
    ck.layers.push_back(L);
  }
  ck.head.gru_w_ih = found.at("head.gru.weight_ih");
  ck.head.gru_w_hh = found.at("head.gru.weight_hh");
  ck.head.gru_b_ih = found.at("head.gru.bias_ih");
  ck.head.gru_b_hh = found.at("head.gru.bias_hh");
  ck.head.w1 = found.at("head.w1.weight");
  ck.head.w2 = found.at("head.w2.weight");
  return ck;
}

}  // namespace ssd
