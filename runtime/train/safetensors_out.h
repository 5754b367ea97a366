// A safetensors writer for the trainer's checkpoints (F32 or BF16 tensors): an 8-byte
// little-endian header length, the JSON header ("__metadata__" string map, then each tensor's
// dtype, shape and data_offsets), padded with spaces to a multiple of 8, then the raw data.
// write() is atomic: it writes PATH.tmp and renames it over PATH, so a crash mid-save never
// leaves a torn checkpoint.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "runtime/core/dtype.h"

namespace ssd::train {

class SafetensorsOut {
 public:
  // values: row-major, shape outermost first; encoded as `type` (F32 or BF16, round to nearest
  // even) when written. The values are copied.
  void add(const std::string& name, std::vector<uint64_t> shape, const float* values,
           DType type);
  void metadata(const std::string& key, const std::string& value) { meta_[key] = value; }
  void write(const std::string& path) const;

 private:
  struct Entry {
    std::string name;
    std::vector<uint64_t> shape;
    DType type;
    std::vector<uint8_t> bytes;
  };
  std::vector<Entry> entries_;
  std::map<std::string, std::string> meta_;
};

// Writes `bytes` to PATH.tmp, then renames it to PATH (throws ssd::Error naming the path).
void write_file_atomic(const std::string& path, const std::vector<uint8_t>& bytes);

}  // namespace ssd::train
