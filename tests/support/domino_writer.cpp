// Random Domino checkpoints: the tensor list comes from the runtime's own domino_tensor_specs, so
// the writer and the loader can never disagree on a name or a shape; only the values are made up.
#include "tests/support/domino_writer.h"

#include <cmath>

#include "runtime/drafters/domino/domino_checkpoint.h"
#include "runtime/io/safetensors_writer.h"
#include "tests/support/tensor_data.h"

namespace ssd::test {

DominoSpec tiny_domino_spec() {
  DominoSpec s;
  DominoConfig& c = s.cfg;
  c.block_size = 8;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.head_dim = 64;
  c.ffn_dim = 512;
  c.target_layers = {0, 1};
  c.gru_dim = 64;
  c.rank = 32;
  c.rms_eps = 1e-5f;
  c.rope_theta = 10000.0f;
  c.target_dim = 256;
  c.target_vocab = 261;
  return s;
}

DominoTensors make_domino_tensors(const DominoSpec& spec) {
  DominoTensors out;
  uint64_t seed = spec.seed * 1000;
  for (const DominoTensorSpec& t : domino_tensor_specs(spec.cfg)) {
    uint64_t n = 1;
    for (uint64_t d : t.shape) n *= d;
    std::vector<float> v;
    const bool is_norm = t.name.find("norm") != std::string::npos;
    if (t.shape.size() == 2) {
      const float scale = std::sqrt(3.0f / static_cast<float>(t.shape[1]));
      v = random_floats(n, ++seed, scale);
    } else if (is_norm) {
      v = random_floats(n, ++seed, 0.2f);
      for (float& x : v) x += 1.0f;
    } else {  // mask_embedding, GRU biases
      v = random_floats(n, ++seed, t.name == "mask_embedding" ? 1.0f : 0.1f);
    }
    out[t.name] = DominoTensor{t.shape, std::move(v)};
  }
  return out;
}

std::string write_domino(const DominoTensors& tensors, const std::string& config_json, DType type,
                         const std::string& path) {
  SafetensorsWriter w;
  for (const auto& [name, t] : tensors) w.add_tensor(name, t.shape, t.values, type);
  w.add_metadata("domino_config", config_json);
  return w.write(path);
}

std::string write_domino(const DominoSpec& spec, const std::string& path) {
  return write_domino(make_domino_tensors(spec), spec.cfg.to_json(), spec.type, path);
}

}  // namespace ssd::test
