// Random Domino drafter checkpoints for tests, in the exact on-disk format the runtime reads
// (runtime/drafters/domino/domino_checkpoint.h): one safetensors file, config as JSON in the
// "__metadata__" key "domino_config".
//
//   TempDir tmp;
//   DominoSpec spec = tiny_domino_spec();          // fits the tiny test targets (d 256, V 261)
//   std::string path = write_domino(spec, tmp.file("domino.safetensors"));
//
// Bad-checkpoint tests edit the pieces before writing:
//   DominoTensors t = make_domino_tensors(spec);
//   t.erase("head.w1.weight");
//   write_domino(t, spec.cfg.to_json(), spec.type, path);
//
// Values: matrices uniform with variance ~1/cols (activations stay O(1), so the head's correction
// is of the same order as the base logits and really changes choices), norm gains 1 +- 0.2,
// the MASK vector and GRU biases small uniform. A pure function of the spec's seed.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "runtime/core/dtype.h"
#include "runtime/drafters/domino/domino_config.h"

namespace ssd::test {

struct DominoSpec {
  DominoConfig cfg;
  DType type = DType::F32;  // F32, F16 or BF16
  uint64_t seed = 11;
};

// Block 8, 2 layers of 4/2 heads x 64, ffn 512, target layers {0, 1}, GRU 64, rank 32,
// target_dim 256, vocab 261: the tiny_model.h defaults.
DominoSpec tiny_domino_spec();

struct DominoTensor {
  std::vector<uint64_t> shape;  // safetensors order (outermost first)
  std::vector<float> values;    // row-major
};
using DominoTensors = std::map<std::string, DominoTensor>;

// Every tensor of domino_tensor_specs(spec.cfg) with random values.
DominoTensors make_domino_tensors(const DominoSpec& spec);

// Writes the tensors (encoded as `type`) and the config JSON text. Returns path.
std::string write_domino(const DominoTensors& tensors, const std::string& config_json, DType type,
                         const std::string& path);
std::string write_domino(const DominoSpec& spec, const std::string& path);

}  // namespace ssd::test
