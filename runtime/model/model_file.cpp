// Opening a model: format detection, tensor-name resolution for both naming schemes, and the
// shape/type checks that make every later access safe.
#include "runtime/model/model_file.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include "runtime/core/error.h"
#include "runtime/model/model_config_sources.h"

namespace ssd {
namespace {

namespace fs = std::filesystem;

std::string gguf_layer(int64_t l, const char* role) { return fmt::format("blk.{}.{}", l, role); }
std::string hf_layer(int64_t l, const char* role) {
  return fmt::format("model.layers.{}.{}", l, role);
}

// role -> (gguf name, hf name) within a layer
struct Role {
  const TensorRef* LayerWeights::*field;
  const char* gguf;
  const char* hf;
};
constexpr Role kRoles[] = {
    {&LayerWeights::attn_norm, "attn_norm.weight", "input_layernorm.weight"},
    {&LayerWeights::wq, "attn_q.weight", "self_attn.q_proj.weight"},
    {&LayerWeights::wk, "attn_k.weight", "self_attn.k_proj.weight"},
    {&LayerWeights::wv, "attn_v.weight", "self_attn.v_proj.weight"},
    {&LayerWeights::wo, "attn_output.weight", "self_attn.o_proj.weight"},
    {&LayerWeights::bq, "attn_q.bias", "self_attn.q_proj.bias"},
    {&LayerWeights::bk, "attn_k.bias", "self_attn.k_proj.bias"},
    {&LayerWeights::bv, "attn_v.bias", "self_attn.v_proj.bias"},
    {&LayerWeights::q_norm, "attn_q_norm.weight", "self_attn.q_norm.weight"},
    {&LayerWeights::k_norm, "attn_k_norm.weight", "self_attn.k_norm.weight"},
    {&LayerWeights::ffn_norm, "ffn_norm.weight", "post_attention_layernorm.weight"},
    {&LayerWeights::w_gate, "ffn_gate.weight", "mlp.gate_proj.weight"},
    {&LayerWeights::w_up, "ffn_up.weight", "mlp.up_proj.weight"},
    {&LayerWeights::w_down, "ffn_down.weight", "mlp.down_proj.weight"},
};

class Resolver {
 public:
  Resolver(const std::vector<TensorRef>& tensors, const std::string& path) : path_(path) {
    for (const auto& t : tensors) by_name_[t.name] = &t;
  }

  const TensorRef* find(const std::string& name) {
    auto it = by_name_.find(name);
    if (it == by_name_.end()) return nullptr;
    return it->second;
  }
  const TensorRef* require(const std::string& name) {
    const TensorRef* t = find(name);
    SSD_CHECK(t != nullptr, "{}: missing tensor '{}'", path_, name);
    return t;
  }
  // Checks ne (innermost first) and, for vectors used as float parameters, the type.
  void expect(const TensorRef* t, std::vector<uint64_t> ne, bool float_only) const {
    if (!t) return;
    auto fmt_ne = [](const std::vector<uint64_t>& v) { return fmt::format("[{}]", fmt::join(v, ", ")); };
    SSD_CHECK(t->ne == ne, "{}: tensor '{}' has shape {} (innermost first), expected {}", path_,
              t->name, fmt_ne(t->ne), fmt_ne(ne));
    if (float_only) {
      SSD_CHECK(t->type == DType::F32 || t->type == DType::F16 || t->type == DType::BF16,
                "{}: tensor '{}' has type {}, expected F32, F16 or BF16", path_, t->name,
                dtype_name(t->type));
    }
  }
 private:
  std::string path_;
  std::map<std::string, const TensorRef*> by_name_;
};

ModelWeights resolve_weights(const std::vector<TensorRef>& tensors, const ModelConfig& c,
                             const std::string& path, bool gguf) {
  Resolver r(tensors, path);
  ModelWeights w;
  const uint64_t dim = c.dim, hd = c.head_dim, q_out = c.n_heads * c.head_dim,
                 kv_out = c.n_kv_heads * c.head_dim, ffn = c.ffn_dim, vocab = c.vocab;
  w.token_embd = r.require(gguf ? "token_embd.weight" : "model.embed_tokens.weight");
  w.output_norm = r.require(gguf ? "output_norm.weight" : "model.norm.weight");
  w.output = r.find(gguf ? "output.weight" : "lm_head.weight");
  if (!w.output) w.output = w.token_embd;  // tied embeddings (SmolLM2, small Qwen)
  w.rope_freqs = gguf ? r.find("rope_freqs.weight") : nullptr;
  r.expect(w.token_embd, {dim, vocab}, false);
  r.expect(w.output_norm, {dim}, true);
  r.expect(w.output, {dim, vocab}, false);
  r.expect(w.rope_freqs, {static_cast<uint64_t>(c.rope_dim / 2)}, true);
  if (w.rope_freqs) SSD_CHECK(w.rope_freqs->type == DType::F32, "{}: rope_freqs.weight must be F32", path);

  w.layers.resize(c.n_layers);
  for (int64_t l = 0; l < c.n_layers; ++l) {
    LayerWeights& L = w.layers[l];
    for (const Role& role : kRoles) {
      const std::string name = gguf ? gguf_layer(l, role.gguf) : hf_layer(l, role.hf);
      L.*role.field = r.find(name);
    }
    auto need = [&](const TensorRef* t, const Role& role) {
      SSD_CHECK(t != nullptr, "{}: missing tensor '{}'", path,
                gguf ? gguf_layer(l, role.gguf) : hf_layer(l, role.hf));
    };
    for (const Role& role : kRoles) {
      const bool optional = role.field == &LayerWeights::bq || role.field == &LayerWeights::bk ||
                            role.field == &LayerWeights::bv || role.field == &LayerWeights::q_norm ||
                            role.field == &LayerWeights::k_norm;
      if (!optional) need(L.*role.field, role);
    }
    if (c.qkv_bias) {
      need(L.bq, kRoles[5]);
      need(L.bk, kRoles[6]);
      need(L.bv, kRoles[7]);
    } else {
      SSD_CHECK(!L.bq && !L.bk && !L.bv, "{}: layer {} has Q/K/V biases but the {} config says none",
                path, l, arch_name(c.arch));
    }
    if (c.qk_norm) {
      need(L.q_norm, kRoles[8]);
      need(L.k_norm, kRoles[9]);
    }
    r.expect(L.attn_norm, {dim}, true);
    r.expect(L.wq, {dim, q_out}, false);
    r.expect(L.wk, {dim, kv_out}, false);
    r.expect(L.wv, {dim, kv_out}, false);
    r.expect(L.wo, {q_out, dim}, false);
    r.expect(L.bq, {q_out}, true);
    r.expect(L.bk, {kv_out}, true);
    r.expect(L.bv, {kv_out}, true);
    r.expect(L.q_norm, {hd}, true);
    r.expect(L.k_norm, {hd}, true);
    r.expect(L.ffn_norm, {dim}, true);
    r.expect(L.w_gate, {dim, ffn}, false);
    r.expect(L.w_up, {dim, ffn}, false);
    r.expect(L.w_down, {ffn, dim}, false);
  }
  return w;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

ModelFile ModelFile::open(const std::string& path) {
  ModelFile m;
  m.path_ = path;
  std::error_code ec;
  SSD_CHECK(fs::exists(path, ec), "{}: model file or directory not found", path);
  const bool is_dir = fs::is_directory(path, ec);
  if (!is_dir && !ends_with(path, ".safetensors") && !ends_with(path, ".json")) {
    m.gguf_ = std::make_unique<GgufFile>(GgufFile::open(path));
    int64_t vocab_fallback = 0;
    if (auto toks = m.gguf_->get_string_array("tokenizer.ggml.tokens"))
      vocab_fallback = static_cast<int64_t>(toks->size());
    m.config_ = config_from_gguf(*m.gguf_, vocab_fallback);
    m.weights_ = resolve_weights(m.gguf_->tensors(), m.config_, path, /*gguf=*/true);
    if (m.weights_.output == m.weights_.token_embd) m.config_.tied_embeddings = true;
  } else {
    m.st_ = std::make_unique<SafetensorsModel>(SafetensorsModel::open(path));
    const std::string cfg = (fs::path(m.st_->directory()) / "config.json").string();
    m.config_ = config_from_hf_json(cfg);
    m.weights_ = resolve_weights(m.st_->tensors(), m.config_, path, /*gguf=*/false);
    if (m.weights_.output == m.weights_.token_embd && !m.config_.tied_embeddings) {
      fail(fmt::format("{}: no lm_head.weight and config.json does not tie word embeddings", path));
    }
  }
  return m;
}

uint64_t ModelFile::parameter_count() const {
  const auto& ts = gguf_ ? gguf_->tensors() : st_->tensors();
  uint64_t n = 0;
  for (const auto& t : ts) n += t.elements();
  return n;
}

uint64_t ModelFile::weight_bytes() const {
  const auto& ts = gguf_ ? gguf_->tensors() : st_->tensors();
  uint64_t n = 0;
  for (const auto& t : ts) n += t.nbytes;
  return n;
}

std::string ModelFile::summary() const {
  const auto& ts = gguf_ ? gguf_->tensors() : st_->tensors();
  std::map<std::string, int> mix;
  for (const auto& t : ts) mix[std::string(dtype_name(t.type))]++;
  std::vector<std::pair<int, std::string>> sorted;
  for (const auto& [k, v] : mix) sorted.emplace_back(-v, k);
  std::sort(sorted.begin(), sorted.end());
  std::string mix_s;
  for (const auto& [negn, k] : sorted) mix_s += fmt::format("{}{} x{}", mix_s.empty() ? "" : ", ", k, -negn);
  const auto& c = config_;
  const std::string fmt_s = gguf_ ? fmt::format("gguf v{}", gguf_->version()) : "safetensors";
  return fmt::format("{} ({}) | {} layers, dim {}, {}/{} heads, vocab {}, ctx {} | {:.1f}M params | {} | {:.1f} MB",
                     arch_name(c.arch), fmt_s, c.n_layers, c.dim, c.n_heads, c.n_kv_heads, c.vocab,
                     c.context_length, parameter_count() / 1e6, mix_s, weight_bytes() / 1e6);
}

}  // namespace ssd
