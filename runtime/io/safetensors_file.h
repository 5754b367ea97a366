// Hugging Face safetensors reader: a single `model.safetensors`, or a sharded checkpoint described
// by `model.safetensors.index.json` (weight_map: tensor name -> shard file). Format facts: u64
// little-endian header length N, then N bytes of JSON {name: {dtype, shape, data_offsets:[b,e]}},
// optional "__metadata__", then the data; offsets are relative to the end of the header. Every
// field is checked (dtype known, shape product matches the byte range, ranges inside the file and
// not overlapping, no overflow); a bad file throws ssd::Error naming the file, tensor and field.
// Supported dtypes: F32, F16, BF16. Shapes are reversed into TensorRef's innermost-first order;
// 0-d (scalar) shapes become ne = {1}; more than 4 dims and zero-sized dims are rejected. In a
// sharded checkpoint the weight_map is authoritative: a tensor it lists must be in its shard, and
// tensors a shard holds but the map assigns elsewhere (or omits) are ignored. Duplicate JSON keys
// are errors. Tensor data is only as aligned as the header length makes it (HF pads it to 8).
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/io/mapped_file.h"
#include "runtime/io/tensor_ref.h"

namespace ssd {

class SafetensorsModel {
 public:
  // `path` is a .safetensors file, an index .json, or a directory containing either
  // (model.safetensors.index.json preferred over model.safetensors).
  static SafetensorsModel open(const std::string& path);
  // Parses one already opened (or in-memory, see MappedFile::from_bytes) .safetensors file.
  static SafetensorsModel parse(MappedFile file);
  SafetensorsModel(SafetensorsModel&&) noexcept = default;
  SafetensorsModel& operator=(SafetensorsModel&&) noexcept = default;
  SafetensorsModel(const SafetensorsModel&) = delete;
  SafetensorsModel& operator=(const SafetensorsModel&) = delete;

  const std::vector<TensorRef>& tensors() const { return tensors_; }
  const TensorRef* find_tensor(std::string_view name) const;
  // "__metadata__" string pairs of all shards, merged.
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // Directory holding the checkpoint (where config.json and tokenizer.json are looked for).
  const std::string& directory() const { return dir_; }

 private:
  SafetensorsModel() = default;
  std::vector<MappedFile> files_;
  std::vector<TensorRef> tensors_;                            // shard by shard, in file order
  std::map<std::string, size_t, std::less<>> tensor_index_;  // name -> index in tensors_
  std::map<std::string, std::string> metadata_;
  std::string dir_;
};

}  // namespace ssd
