#include "topology/sim/model_shape.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>

#include "runtime/core/error.h"
#include "runtime/model/model_config_sources.h"
#include "runtime/model/model_file.h"

namespace ssd::sim {
namespace {

ModelShape shape(std::string name, int64_t layers, int64_t dim, int64_t ffn, int64_t heads,
                 int64_t kv, int64_t hd, int64_t vocab) {
  ModelShape s;
  s.name = std::move(name);
  s.n_layers = layers;
  s.dim = dim;
  s.ffn_dim = ffn;
  s.n_heads = heads;
  s.n_kv_heads = kv;
  s.head_dim = hd;
  s.vocab = vocab;
  return s;
}

ModelShape from_config(const ModelConfig& c, std::string name) {
  return shape(std::move(name), c.n_layers, c.dim, c.ffn_dim, c.n_heads, c.n_kv_heads, c.head_dim,
               c.vocab);
}

}  // namespace

double ModelShape::params() const {
  const double d = dim, q = attn_width(), kvw = static_cast<double>(n_kv_heads * head_dim);
  const double layer = d * q + 2 * d * kvw + q * d + 3 * d * static_cast<double>(ffn_dim);
  return static_cast<double>(n_layers) * layer + static_cast<double>(vocab) * d;
}

double ModelShape::total_weight_bytes() const {
  return weight_bytes > 0 ? weight_bytes : params() * weight_bytes_per_param;
}

double ModelShape::head_bytes() const {
  if (head_weight_bytes > 0) return head_weight_bytes;
  const double per_param = weight_bytes > 0 ? weight_bytes / params() : weight_bytes_per_param;
  return head_params() * per_param;
}

double ModelShape::kv_bytes_per_token() const {
  return 2.0 * static_cast<double>(n_layers * n_kv_heads * head_dim) * kv_bytes_per_elem;
}

void ModelShape::validate() const {
  auto positive = [&](int64_t v, const char* what) {
    SSD_CHECK(v > 0, "model '{}': {} must be > 0 (got {})", name, what, v);
  };
  positive(n_layers, "n_layers");
  positive(dim, "dim");
  positive(ffn_dim, "ffn_dim");
  positive(n_heads, "n_heads");
  positive(n_kv_heads, "n_kv_heads");
  positive(head_dim, "head_dim");
  positive(vocab, "vocab");
  SSD_CHECK(n_heads % n_kv_heads == 0, "model '{}': n_heads {} is not a multiple of n_kv_heads {}",
            name, n_heads, n_kv_heads);
  SSD_CHECK(weight_bytes_per_param > 0 || weight_bytes > 0,
            "model '{}': weight bytes per parameter must be > 0", name);
}

void ModelShape::check_tp(int32_t tp) const {
  SSD_CHECK(tp >= 1, "TP degree must be >= 1 (got {})", tp);
  SSD_CHECK(n_heads % tp == 0, "TP degree {} does not divide {}'s {} query heads", tp, name,
            n_heads);
  SSD_CHECK(n_kv_heads % tp == 0,
            "TP degree {} does not divide {}'s {} KV heads (each rank needs whole KV heads)", tp,
            name, n_kv_heads);
}

std::vector<std::string> model_preset_names() {
  return {"llama-3.1-70b", "llama-3.2-1b",  "qwen3-32b",
          "qwen3-0.6b",    "smollm2-135m", "smollm2-domino"};
}

ModelShape model_preset(const std::string& name) {
  // Shapes from the models' published config.json files; BF16 weights unless said.
  if (name == "llama-3.1-70b") return shape(name, 80, 8192, 28672, 64, 8, 128, 128256);
  if (name == "llama-3.2-1b") return shape(name, 16, 2048, 8192, 32, 8, 64, 128256);
  if (name == "qwen3-32b") return shape(name, 64, 5120, 25600, 64, 8, 128, 151936);
  if (name == "qwen3-0.6b") return shape(name, 28, 1024, 3072, 16, 8, 128, 151936);
  if (name == "smollm2-135m") {
    ModelShape s = shape(name, 30, 576, 1536, 9, 3, 64, 49152);
    s.weight_bytes_per_param = 20.0 / 32.0;  // Q4_1: 32 weights in 16 bytes + f16 scale and min
    s.kv_bytes_per_elem = 4;                 // the CPU engine's KV cache is f32
    return s;
  }
  if (name == "smollm2-domino") {
    // models/smollm2-domino: 4 Llama layers of SmolLM2's width, an 8192-id draft vocabulary, BF16,
    // conditioned on 3 target layers' hidden states (3 x 576 floats per token).
    ModelShape s = shape(name, 4, 576, 1536, 9, 3, 64, 8192);
    s.style = DraftStyle::kBlock;
    s.feature_dim = 3 * 576;
    s.kv_bytes_per_elem = 4;
    return s;
  }
  fail(fmt::format("unknown model preset '{}' (known: {}; or a GGUF file / config.json path)", name,
                   fmt::join(model_preset_names(), ", ")));
}

ModelShape load_model_shape(const std::string& name_or_path) {
  namespace fs = std::filesystem;
  if (!fs::exists(name_or_path)) return model_preset(name_or_path);
  const std::string stem = fs::path(name_or_path).stem().string();
  if (fs::path(name_or_path).filename() == "config.json") {
    ModelShape s = from_config(config_from_hf_json(name_or_path), stem);
    s.validate();
    return s;
  }
  // A model file (GGUF or checkpoint): its real weight bytes count, whatever the types.
  const ModelFile f = ModelFile::open(name_or_path);
  ModelShape s = from_config(f.config(), fs::path(name_or_path).filename().string());
  s.weight_bytes = static_cast<double>(f.weight_bytes());
  const TensorRef* head = f.weights().output ? f.weights().output : f.weights().token_embd;
  if (head) s.head_weight_bytes = static_cast<double>(head->nbytes);
  s.kv_bytes_per_elem = 4;  // the CPU engine's KV cache
  s.validate();
  return s;
}

}  // namespace ssd::sim
