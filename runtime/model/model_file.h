// A model opened from disk: the mapped file(s), the resolved ModelConfig and the ModelWeights that
// point into the mapping. Both formats users have are accepted:
//   - a GGUF file (v2/v3), hyper-parameters from `<arch>.*` metadata;
//   - a Hugging Face checkpoint: a directory (or a .safetensors / index .json inside it) with
//     config.json beside the weights.
// Opening checks every shape and type; a malformed model throws ssd::Error naming the file, the
// tensor or field, and the offending value. Move-only (it owns the mappings).
#pragma once

#include <memory>
#include <string>

#include "runtime/io/gguf_file.h"
#include "runtime/io/safetensors_file.h"
#include "runtime/model/model_config.h"
#include "runtime/model/model_weights.h"

namespace ssd {

class ModelFile {
 public:
  static ModelFile open(const std::string& path);
  ModelFile(ModelFile&&) noexcept = default;
  ModelFile& operator=(ModelFile&&) noexcept = default;

  const std::string& path() const { return path_; }
  const ModelConfig& config() const { return config_; }
  const ModelWeights& weights() const { return weights_; }
  // Exactly one of these is non-null.
  const GgufFile* gguf() const { return gguf_.get(); }
  const SafetensorsModel* safetensors() const { return st_.get(); }

  uint64_t parameter_count() const;  // distinct tensors' elements (a tied head counted once)
  uint64_t weight_bytes() const;     // bytes of all tensors in the file(s)
  // One line: "llama (gguf v3) | 30 layers, dim 576, 9/3 heads, vocab 49152 | 134.5M params |
  // Q4_1 x210, F32 x61, Q8_0 x1 | 98.3 MB".
  std::string summary() const;

 private:
  ModelFile() = default;
  std::string path_;
  std::unique_ptr<GgufFile> gguf_;
  std::unique_ptr<SafetensorsModel> st_;
  ModelConfig config_;
  ModelWeights weights_;
};

}  // namespace ssd
