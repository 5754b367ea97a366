#include "runtime/model/model_config.h"

#include <cmath>

#include "runtime/core/error.h"

namespace ssd {

const char* arch_name(Arch a) {
  switch (a) {
    case Arch::Llama: return "llama";
    case Arch::Qwen2: return "qwen2";
    case Arch::Qwen3: return "qwen3";
  }
  return "?";
}

void ModelConfig::validate(const std::string& source) const {
  auto positive = [&](int64_t v, const char* field) {
    SSD_CHECK(v > 0 && v < (int64_t{1} << 31), "{}: {} = {} is out of range", source, field, v);
  };
  positive(n_layers, "n_layers");
  positive(dim, "dim");
  positive(ffn_dim, "ffn_dim");
  positive(n_heads, "n_heads");
  positive(n_kv_heads, "n_kv_heads");
  positive(head_dim, "head_dim");
  positive(vocab, "vocab");
  positive(context_length, "context_length");
  SSD_CHECK(n_heads % n_kv_heads == 0, "{}: n_heads {} is not a multiple of n_kv_heads {}", source,
            n_heads, n_kv_heads);
  SSD_CHECK(head_dim % 2 == 0, "{}: head_dim {} must be even for RoPE", source, head_dim);
  SSD_CHECK(rope_dim > 0 && rope_dim <= head_dim && rope_dim % 2 == 0,
            "{}: rope dimension {} must be even and at most head_dim {}", source, rope_dim, head_dim);
  SSD_CHECK(std::isfinite(rms_eps) && rms_eps > 0, "{}: rms epsilon {} must be positive", source,
            rms_eps);
  SSD_CHECK(std::isfinite(rope_theta) && rope_theta > 0, "{}: rope theta {} must be positive",
            source, rope_theta);
  SSD_CHECK(rope_scaling.factor > 0, "{}: rope scaling factor {} must be positive", source,
            rope_scaling.factor);
}

std::vector<float> rope_inv_freq(const ModelConfig& cfg, const std::vector<float>* freq_factors) {
  const int64_t half = cfg.rope_dim / 2;
  std::vector<float> inv(half);
  const auto& rs = cfg.rope_scaling;
  for (int64_t i = 0; i < half; ++i) {
    double f = std::pow(static_cast<double>(cfg.rope_theta), -2.0 * i / cfg.rope_dim);
    if (freq_factors) {
      f /= (*freq_factors)[i];
    } else if (rs.kind == RopeScaling::Kind::Linear) {
      f /= rs.factor;
    } else if (rs.kind == RopeScaling::Kind::Llama3) {
      // Llama 3.1 scaling: long wavelengths are slowed by `factor`, short ones kept, and the band
      // between is interpolated smoothly in wavelength.
      const double pi = 3.14159265358979323846;
      const double wavelen = 2 * pi / f;
      const double low_wavelen = rs.original_context / rs.low_freq_factor;
      const double high_wavelen = rs.original_context / rs.high_freq_factor;
      if (wavelen > low_wavelen) {
        f /= rs.factor;
      } else if (wavelen >= high_wavelen) {
        const double smooth = (rs.original_context / wavelen - rs.low_freq_factor) /
                              (rs.high_freq_factor - rs.low_freq_factor);
        f = (1 - smooth) * f / rs.factor + smooth * f;
      }
    }
    inv[i] = static_cast<float>(f);
  }
  return inv;
}

}  // namespace ssd
