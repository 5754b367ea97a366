// Parameter initialisation (see param_init.h).
#include "runtime/train/param_init.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "runtime/core/error.h"
#include "runtime/train/frozen_target.h"
#include "runtime/train/train_rng.h"

namespace ssd::train {

std::vector<int32_t> default_init_layers(const DominoConfig& cfg, int64_t target_layers) {
  const int32_t deepest = *std::max_element(cfg.target_layers.begin(), cfg.target_layers.end());
  const int64_t first =
      deepest + 1 + cfg.n_layers <= target_layers ? deepest + 1 : target_layers - cfg.n_layers;
  std::vector<int32_t> out;
  for (int32_t l = 0; l < cfg.n_layers; ++l)
    out.push_back(static_cast<int32_t>(std::max<int64_t>(0, first + l)));
  return out;
}

std::vector<std::string> init_params(const ParamLayout& layout, const DominoConfig& cfg,
                                     uint64_t seed, const ModelFile* target,
                                     const std::vector<int32_t>& init_layers, FcInit fc_init,
                                     float* params) {
  std::vector<std::string> log;
  const double g = cfg.gru_dim;
  for (size_t ti = 0; ti < layout.tensors().size(); ++ti) {
    const ParamTensor& t = layout.tensors()[ti];
    float* p = params + t.offset;
    const uint64_t stream = 1000 + ti;
    auto normal = [&](double std) {
      for (int64_t i = 0; i < t.size; ++i)
        p[i] = static_cast<float>(std * rng_normal(seed, stream, static_cast<uint64_t>(i)));
    };
    if (t.name.find("norm") != std::string::npos) {
      std::fill(p, p + t.size, 1.0f);
    } else if (t.name == "mask_embedding") {
      normal(0.02);
    } else if (t.name.rfind("head.gru.", 0) == 0) {
      const double b = 1.0 / std::sqrt(g);
      for (int64_t i = 0; i < t.size; ++i)
        p[i] = static_cast<float>(b * (2.0 * rng_uniform(seed, stream, i) - 1.0));
    } else if (t.name == "head.w2.weight" || t.name == "ctx_inject.weight") {
      std::fill(p, p + t.size, 0.0f);
    } else {  // fc, W1, layer matrices: N(0, 1 / in)
      normal(1.0 / std::sqrt(static_cast<double>(t.shape.at(1))));
    }
  }
  DominoView v = make_view(layout, cfg, params);
  const int64_t d = cfg.target_dim;
  if (fc_init == FcInit::Deepest) {
    // fc [d, F]: row i reads column slice * d + i of the deepest layer's block.
    const auto deepest = std::max_element(cfg.target_layers.begin(), cfg.target_layers.end());
    const int64_t slice = deepest - cfg.target_layers.begin(), F = cfg.feature_dim();
    std::fill(v.fc, v.fc + d * F, 0.0f);
    for (int64_t i = 0; i < d; ++i) v.fc[i * F + slice * d + i] = 1.0f;
    log.push_back(fmt::format("fc <- identity on the features of target layer {}", *deepest));
  }
  if (target && copy_target_output_norm(*target, d, v.norm))
    log.push_back("norm <- the target's output norm");
  if (init_layers.empty()) return log;
  SSD_CHECK(static_cast<int32_t>(init_layers.size()) == cfg.n_layers,
            "--init-layers: {} layers given for a backbone of {} layers", init_layers.size(),
            cfg.n_layers);
  for (int32_t l = 0; l < cfg.n_layers; ++l) {
    if (target && copy_target_layer(*target, init_layers[l], cfg, v, l))
      log.push_back(fmt::format("backbone layer {} <- target layer {}", l, init_layers[l]));
    else
      log.push_back(fmt::format("backbone layer {}: random init (shape differs from target layer {})",
                                l, init_layers[l]));
  }
  return log;
}

}  // namespace ssd::train
