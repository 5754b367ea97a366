// GGUF metadata -> ModelConfig. Key names follow the GGUF spec's LLM section: `<arch>.block_count`,
// `<arch>.embedding_length`, `<arch>.attention.head_count`, ... where <arch> is
// general.architecture.
#include <fmt/format.h>

#include "runtime/core/error.h"
#include "runtime/model/model_config_sources.h"

namespace ssd {
namespace {

struct GgufKeys {
  const GgufFile& f;
  std::string arch;

  int64_t req_int(const std::string& suffix) const {
    const std::string key = arch + "." + suffix;
    auto v = f.get_int(key);
    SSD_CHECK(v.has_value(), "{}: missing metadata key '{}'", f.path(), key);
    return *v;
  }
  int64_t opt_int(const std::string& suffix, int64_t dflt) const {
    return f.get_int(arch + "." + suffix).value_or(dflt);
  }
  double opt_float(const std::string& suffix, double dflt) const {
    return f.get_float(arch + "." + suffix).value_or(dflt);
  }
};

}  // namespace

ModelConfig config_from_gguf(const GgufFile& f, int64_t vocab_fallback) {
  auto arch_sv = f.get_string("general.architecture");
  SSD_CHECK(arch_sv.has_value(), "{}: missing metadata key 'general.architecture'", f.path());
  const std::string arch(*arch_sv);
  ModelConfig c;
  if (arch == "llama") {
    c.arch = Arch::Llama;
    // convert_hf_to_gguf permutes Llama's Q/K rows so that RoPE rotates adjacent pairs.
    c.rope_layout = RopeLayout::Interleaved;
  } else if (arch == "qwen2") {
    c.arch = Arch::Qwen2;
    c.rope_layout = RopeLayout::NeoX;
    c.qkv_bias = true;
  } else if (arch == "qwen3") {
    c.arch = Arch::Qwen3;
    c.rope_layout = RopeLayout::NeoX;
    c.qk_norm = true;
  } else {
    fail(fmt::format("{}: general.architecture '{}' is not supported (llama, qwen2, qwen3)",
                     f.path(), arch));
  }
  GgufKeys k{f, arch};
  c.n_layers = k.req_int("block_count");
  c.dim = k.req_int("embedding_length");
  c.ffn_dim = k.req_int("feed_forward_length");
  c.n_heads = k.req_int("attention.head_count");
  c.n_kv_heads = k.opt_int("attention.head_count_kv", c.n_heads);
  c.head_dim = c.n_heads > 0 ? k.opt_int("attention.key_length", c.dim / c.n_heads) : 0;
  c.vocab = k.opt_int("vocab_size", vocab_fallback);
  c.context_length = k.opt_int("context_length", 4096);
  c.rms_eps = static_cast<float>(k.opt_float("attention.layer_norm_rms_epsilon", 1e-5));
  c.rope_theta = static_cast<float>(k.opt_float("rope.freq_base", 10000.0));
  c.rope_dim = k.opt_int("rope.dimension_count", c.head_dim);
  if (auto type = f.get_string(arch + ".rope.scaling.type")) {
    if (*type == "linear") {
      c.rope_scaling.kind = RopeScaling::Kind::Linear;
      c.rope_scaling.factor = static_cast<float>(k.opt_float("rope.scaling.factor", 1.0));
    } else if (*type != "none") {
      fail(fmt::format("{}: {}.rope.scaling.type '{}' is not supported (none, linear)", f.path(),
                       arch, *type));
    }
  }
  // Llama 3 GGUFs carry their scaling as the rope_freqs.weight tensor, applied by the loader.
  c.validate(f.path());
  return c;
}

}  // namespace ssd
