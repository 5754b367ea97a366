// The one safetensors writer (the trainer's checkpoints, the tests' model files): an 8-byte
// little-endian header length, the JSON header ("__metadata__" string map first, then each
// tensor's dtype, shape and data_offsets in the order added), padded with spaces to a multiple
// of 8, then the tensors back to back. One file, or a sharded checkpoint (N files plus
// model.safetensors.index.json, as Hugging Face's tools write it).
//
//   SafetensorsWriter w;
//   w.add_tensor("model.layers.0.self_attn.q_proj.weight", {8, 16}, values, DType::BF16)
//       .add_metadata("format", "pt");
//   w.write(path);                // atomic: PATH.tmp, then renamed over PATH
//   w.write_sharded(dir, 3);      // or: index + 3 shards in dir
//
// Shapes are outermost first, exactly as stored (a Linear weight is {out, in}); values are
// row-major floats encoded as F32, F16 or BF16 (round to nearest even). Malformed-file tests
// edit header() and rebuild the bytes with assemble(header.dump(), data()).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "runtime/core/dtype.h"

namespace ssd {

class SafetensorsWriter {
 public:
  // type must be F32, F16 or BF16; values.size() == product(shape). The values are copied.
  SafetensorsWriter& add_tensor(std::string name, std::vector<uint64_t> shape,
                                std::span<const float> values, DType type = DType::F32);
  // Any dtype string ("F32", "I64", ...) with its bytes verbatim, unchecked (malformed files).
  SafetensorsWriter& add_raw_tensor(std::string name, std::string dtype,
                                    std::vector<uint64_t> shape, std::vector<uint8_t> bytes);
  SafetensorsWriter& add_metadata(std::string key, std::string value);

  nlohmann::ordered_json header() const;  // {"__metadata__": ..., name: {dtype, shape, offsets}}
  std::vector<uint8_t> data() const;      // the data section: every tensor back to back
  std::vector<uint8_t> bytes() const;     // the whole file
  std::string write(const std::string& path) const;  // atomic; returns path
  // Splits the tensors, in order, over n_shards files "model-0000i-of-0000n.safetensors" in
  // `dir` (sizes differ by at most one tensor; n_shards <= tensors) and writes
  // model.safetensors.index.json. Returns the index path.
  std::string write_sharded(const std::string& dir, int n_shards) const;

  // u64 header length + header text padded to 8 bytes + data.
  static std::vector<uint8_t> assemble(std::string header_json, std::span<const uint8_t> data);

 private:
  struct Tensor {
    std::string name;
    std::string dtype;
    std::vector<uint64_t> shape;
    std::vector<uint8_t> bytes;
  };
  std::vector<Tensor> tensors_;
  std::vector<std::pair<std::string, std::string>> metadata_;
};

// Writes `bytes` to PATH.tmp, then renames it to PATH, so a crash mid-write never leaves a torn
// file. Throws ssd::Error naming the path (disk full, no permission).
void write_file_atomic(const std::string& path, std::span<const uint8_t> bytes);

}  // namespace ssd
