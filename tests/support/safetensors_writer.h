// SafetensorsWriter: builds Hugging Face safetensors checkpoints for tests, as one file or as a
// sharded checkpoint (model.safetensors.index.json + N shards) in a directory.
//
//   ssd::test::TempDir tmp;
//   ssd::test::SafetensorsWriter w;
//   auto wq = ssd::test::random_floats(8 * 16, /*seed=*/7);
//   w.add_tensor("model.layers.0.self_attn.q_proj.weight", {8, 16}, wq, ssd::DType::BF16)
//       .add_metadata("format", "pt");
//   w.write(tmp.file("model.safetensors"));      // single file
//   w.write_sharded(tmp.path(), 3);              // or: index + 3 shards in tmp.path()
//
// Conventions: `shape` is outermost first, exactly as stored in the file (a Linear weight is
// {out, in}); the reader reverses it into TensorRef::ne. Values are row-major floats encoded as
// F32/F16/BF16 (F16/BF16 through kernels::quantize_row, round to nearest even). Tensors are laid
// out in the order added, with no gaps; the JSON header is padded with spaces to 8 bytes.
//
// Bad-file tests: header() returns the JSON header as nlohmann::json and data() the data section,
// so a test can edit one field and rebuild the file with assemble(header.dump(), data).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "runtime/core/dtype.h"
#include "tests/support/tensor_data.h"
#include "tests/support/temp_dir.h"

namespace ssd::test {

class SafetensorsWriter {
 public:
  // type must be F32, F16 or BF16; values.size() == product(shape).
  SafetensorsWriter& add_tensor(std::string name, std::vector<uint64_t> shape,
                                std::span<const float> values, DType type = DType::F32);
  // Any dtype string ("F32", "I64", ...) with bytes verbatim, unchecked (for malformed files).
  SafetensorsWriter& add_raw_tensor(std::string name, std::string dtype,
                                    std::vector<uint64_t> shape, std::vector<uint8_t> bytes);
  SafetensorsWriter& add_metadata(std::string key, std::string value);

  nlohmann::json header() const;     // {name: {dtype, shape, data_offsets}, "__metadata__": ...}
  std::vector<uint8_t> data() const;  // the data section: all tensors back to back
  std::vector<uint8_t> bytes() const;
  std::string write(const std::string& path) const;  // returns path
  // Splits the tensors, in order, over n_shards files "model-0000i-of-0000n.safetensors" in `dir`
  // (shard sizes differ by at most one tensor; n_shards <= number of tensors) and writes
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

}  // namespace ssd::test
