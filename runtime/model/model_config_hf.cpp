// config.json (Hugging Face transformers) -> ModelConfig. Field names are those of
// LlamaConfig / Qwen2Config / Qwen3Config; absent optional fields take those classes' defaults.
#include <fmt/format.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "runtime/core/error.h"
#include "runtime/model/model_config_sources.h"

namespace ssd {
namespace {

using nlohmann::json;

int64_t req_int(const json& j, const std::string& path, const char* key) {
  auto it = j.find(key);
  SSD_CHECK(it != j.end(), "{}: missing field '{}'", path, key);
  SSD_CHECK(it->is_number_integer(), "{}: field '{}' must be an integer, got {}", path, key,
            it->dump());
  return it->get<int64_t>();
}

int64_t opt_int(const json& j, const std::string& path, const char* key, int64_t dflt) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return dflt;
  SSD_CHECK(it->is_number_integer(), "{}: field '{}' must be an integer, got {}", path, key,
            it->dump());
  return it->get<int64_t>();
}

double opt_num(const json& j, const std::string& path, const char* key, double dflt) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return dflt;
  SSD_CHECK(it->is_number(), "{}: field '{}' must be a number, got {}", path, key, it->dump());
  return it->get<double>();
}

bool opt_bool(const json& j, const std::string& path, const char* key, bool dflt) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return dflt;
  SSD_CHECK(it->is_boolean(), "{}: field '{}' must be true or false, got {}", path, key,
            it->dump());
  return it->get<bool>();
}

}  // namespace

ModelConfig config_from_hf_json(const std::string& path) {
  std::ifstream in(path);
  SSD_CHECK(in.good(), "{}: cannot open config.json", path);
  json j;
  try {
    j = json::parse(in);
  } catch (const json::exception& e) {
    fail(fmt::format("{}: not valid JSON: {}", path, e.what()));
  }
  SSD_CHECK(j.is_object(), "{}: expected a JSON object", path);
  const std::string type = j.value("model_type", std::string());
  ModelConfig c;
  c.rope_layout = RopeLayout::NeoX;  // HF checkpoints rotate halves (rotate_half)
  if (type == "llama" || type == "mistral") {
    c.arch = Arch::Llama;
    c.qkv_bias = opt_bool(j, path, "attention_bias", false);
  } else if (type == "qwen2") {
    c.arch = Arch::Qwen2;
    c.qkv_bias = true;
  } else if (type == "qwen3") {
    c.arch = Arch::Qwen3;
    c.qk_norm = true;
    c.qkv_bias = opt_bool(j, path, "attention_bias", false);
  } else {
    fail(fmt::format("{}: model_type '{}' is not supported (llama, mistral, qwen2, qwen3)", path,
                     type));
  }
  c.n_layers = req_int(j, path, "num_hidden_layers");
  c.dim = req_int(j, path, "hidden_size");
  c.ffn_dim = req_int(j, path, "intermediate_size");
  c.n_heads = req_int(j, path, "num_attention_heads");
  c.n_kv_heads = opt_int(j, path, "num_key_value_heads", c.n_heads);
  c.head_dim = opt_int(j, path, "head_dim", c.n_heads > 0 ? c.dim / c.n_heads : 0);
  c.vocab = req_int(j, path, "vocab_size");
  c.context_length = opt_int(j, path, "max_position_embeddings", 4096);
  c.rms_eps = static_cast<float>(opt_num(j, path, "rms_norm_eps", 1e-6));
  c.rope_theta = static_cast<float>(opt_num(j, path, "rope_theta", 10000.0));
  c.rope_dim = c.head_dim;
  c.tied_embeddings = opt_bool(j, path, "tie_word_embeddings", false);
  auto rs = j.find("rope_scaling");
  if (rs != j.end() && !rs->is_null()) {
    SSD_CHECK(rs->is_object(), "{}: rope_scaling must be an object", path);
    std::string kind = rs->value("rope_type", rs->value("type", std::string("default")));
    if (kind == "llama3") {
      c.rope_scaling.kind = RopeScaling::Kind::Llama3;
      c.rope_scaling.factor = static_cast<float>(opt_num(*rs, path, "factor", 8.0));
      c.rope_scaling.low_freq_factor = static_cast<float>(opt_num(*rs, path, "low_freq_factor", 1));
      c.rope_scaling.high_freq_factor =
          static_cast<float>(opt_num(*rs, path, "high_freq_factor", 4));
      c.rope_scaling.original_context =
          opt_int(*rs, path, "original_max_position_embeddings", 8192);
    } else if (kind == "linear") {
      c.rope_scaling.kind = RopeScaling::Kind::Linear;
      c.rope_scaling.factor = static_cast<float>(opt_num(*rs, path, "factor", 1.0));
    } else if (kind != "default") {
      fail(fmt::format("{}: rope_scaling type '{}' is not supported (default, linear, llama3)",
                       path, kind));
    }
  }
  c.validate(path);
  return c;
}

}  // namespace ssd
