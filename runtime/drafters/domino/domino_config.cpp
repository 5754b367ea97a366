// JSON <-> DominoConfig. Strict on the fields it knows (each required, integer where an integer
// is meant), lenient on extra keys so a trainer can record provenance next to the config.
#include "runtime/drafters/domino/domino_config.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "runtime/core/error.h"

namespace ssd {
namespace {

using nlohmann::json;

const json& field(const json& j, const std::string& src, const char* key) {
  auto it = j.find(key);
  SSD_CHECK(it != j.end(), "{}: domino_config is missing field '{}'", src, key);
  return *it;
}

int64_t get_int(const json& j, const std::string& src, const char* key) {
  const json& v = field(j, src, key);
  SSD_CHECK(v.is_number_integer(), "{}: domino_config field '{}' must be an integer, got {}", src,
            key, v.dump());
  return v.get<int64_t>();
}

int32_t get_int32(const json& j, const std::string& src, const char* key) {
  const int64_t v = get_int(j, src, key);
  SSD_CHECK(v >= 0 && v <= (int64_t{1} << 30), "{}: domino_config field '{}' = {} is out of range",
            src, key, v);
  return static_cast<int32_t>(v);
}

double get_num(const json& j, const std::string& src, const char* key) {
  const json& v = field(j, src, key);
  SSD_CHECK(v.is_number(), "{}: domino_config field '{}' must be a number, got {}", src, key,
            v.dump());
  return v.get<double>();
}

}  // namespace

DominoConfig DominoConfig::from_json(const std::string& text, const std::string& src) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    fail(fmt::format("{}: domino_config is not valid JSON: {}", src, e.what()));
  }
  SSD_CHECK(j.is_object(), "{}: domino_config must be a JSON object", src);
  DominoConfig c;
  c.block_size = get_int32(j, src, "block_size");
  c.n_layers = get_int32(j, src, "n_layers");
  c.n_heads = get_int32(j, src, "heads");
  c.n_kv_heads = get_int32(j, src, "kv_heads");
  c.head_dim = get_int32(j, src, "head_dim");
  c.ffn_dim = get_int32(j, src, "ffn_dim");
  c.gru_dim = get_int32(j, src, "gru_dim");
  c.rank = get_int32(j, src, "rank");
  c.rms_eps = static_cast<float>(get_num(j, src, "rms_eps"));
  c.rope_theta = static_cast<float>(get_num(j, src, "rope_theta"));
  c.target_dim = get_int(j, src, "target_dim");
  c.target_vocab = get_int(j, src, "target_vocab");
  const json& layers = field(j, src, "target_layers");
  SSD_CHECK(layers.is_array(), "{}: domino_config field 'target_layers' must be an array, got {}",
            src, layers.dump());
  for (const json& l : layers) {
    SSD_CHECK(l.is_number_integer(),
              "{}: domino_config field 'target_layers' must hold integers, got {}", src, l.dump());
    const int64_t v = l.get<int64_t>();
    SSD_CHECK(v >= 0 && v < (int64_t{1} << 20),
              "{}: domino_config field 'target_layers' has layer {}, which no model has", src, v);
    c.target_layers.push_back(static_cast<int32_t>(v));
  }
  if (auto it = j.find("draft_vocab"); it != j.end()) {
    SSD_CHECK(it->is_array(), "{}: domino_config field 'draft_vocab' must be an array, got {}",
              src, it->dump().substr(0, 80));
    for (const json& t : *it) {
      SSD_CHECK(t.is_number_integer() && t.get<int64_t>() >= 0 && t.get<int64_t>() < c.target_vocab,
                "{}: domino_config field 'draft_vocab' holds {}, not a token id of the target's "
                "vocabulary (0..{})",
                src, t.dump(), c.target_vocab - 1);
      c.draft_vocab.push_back(t.get<int32_t>());
    }
  }
  if (auto it = j.find("context_inject"); it != j.end()) {
    SSD_CHECK(it->is_boolean(), "{}: domino_config field 'context_inject' must be true or false, got {}",
              src, it->dump().substr(0, 80));
    c.context_inject = it->get<bool>();
  }
  c.validate(src);
  return c;
}

std::string DominoConfig::to_json() const {
  json j;
  j["block_size"] = block_size;
  j["n_layers"] = n_layers;
  j["heads"] = n_heads;
  j["kv_heads"] = n_kv_heads;
  j["head_dim"] = head_dim;
  j["ffn_dim"] = ffn_dim;
  j["target_layers"] = target_layers;
  j["gru_dim"] = gru_dim;
  j["rank"] = rank;
  j["rms_eps"] = rms_eps;
  j["rope_theta"] = rope_theta;
  j["target_dim"] = target_dim;
  j["target_vocab"] = target_vocab;
  if (!draft_vocab.empty()) j["draft_vocab"] = draft_vocab;
  if (context_inject) j["context_inject"] = true;
  return j.dump();
}

void DominoConfig::validate(const std::string& src) const {
  auto positive = [&](int64_t v, const char* key) {
    SSD_CHECK(v > 0, "{}: domino_config field '{}' = {} must be positive", src, key, v);
  };
  SSD_CHECK(block_size >= 2 && block_size <= 64,
            "{}: domino_config field 'block_size' = {} must be between 2 and 64", src, block_size);
  positive(n_layers, "n_layers");
  positive(n_heads, "heads");
  positive(n_kv_heads, "kv_heads");
  positive(head_dim, "head_dim");
  positive(ffn_dim, "ffn_dim");
  positive(gru_dim, "gru_dim");
  positive(rank, "rank");
  positive(target_dim, "target_dim");
  positive(target_vocab, "target_vocab");
  SSD_CHECK(n_heads % n_kv_heads == 0,
            "{}: domino_config field 'heads' = {} is not a multiple of 'kv_heads' = {}", src,
            n_heads, n_kv_heads);
  SSD_CHECK(head_dim % 2 == 0, "{}: domino_config field 'head_dim' = {} must be even (RoPE pairs)",
            src, head_dim);
  SSD_CHECK(!target_layers.empty(), "{}: domino_config field 'target_layers' is empty", src);
  SSD_CHECK(std::isfinite(rms_eps) && rms_eps > 0,
            "{}: domino_config field 'rms_eps' = {} must be positive", src, rms_eps);
  for (size_t i = 1; i < draft_vocab.size(); ++i)
    SSD_CHECK(draft_vocab[i - 1] < draft_vocab[i],
              "{}: domino_config field 'draft_vocab' must be strictly increasing (entry {} = {} "
              "follows {})",
              src, i, draft_vocab[i], draft_vocab[i - 1]);
  SSD_CHECK(std::isfinite(rope_theta) && rope_theta > 1,
            "{}: domino_config field 'rope_theta' = {} must be greater than 1", src, rope_theta);
}

void DominoConfig::check_target(int64_t depth, int64_t dim, int64_t vocab,
                                const std::string& src) const {
  for (int32_t l : target_layers)
    SSD_CHECK(l < depth,
              "{}: domino_config field 'target_layers' asks for target layer {}, but the target "
              "has {} layers (0..{})",
              src, l, depth, depth - 1);
  SSD_CHECK(target_dim == dim,
            "{}: domino_config field 'target_dim' = {} does not match the target's dim {}", src,
            target_dim, dim);
  SSD_CHECK(target_vocab == vocab,
            "{}: domino_config field 'target_vocab' = {} does not match the target's vocabulary "
            "size {}",
            src, target_vocab, vocab);
}

}  // namespace ssd
