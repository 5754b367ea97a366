// A named tensor that lives inside a mapped model file, described the same way whatever the file
// format: `ne` lists dimensions innermost first (GGML order), so a weight matrix of `out` rows by
// `in` columns has ne = {in, out} and row r starts at data + r * row_bytes. Safetensors shapes
// (outermost first) are reversed into this order by their reader.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/core/dtype.h"

namespace ssd {

struct TensorRef {
  std::string name;
  DType type = DType::F32;
  std::vector<uint64_t> ne;       // innermost first; 1 to 4 dims
  const uint8_t* data = nullptr;  // points into a mapping owned by the file object
  uint64_t nbytes = 0;
  std::string file;               // the file it came from, for error messages

  uint64_t elements() const {
    uint64_t n = 1;
    for (auto d : ne) n *= d;
    return n;
  }
  uint64_t rows() const { return ne.empty() ? 0 : elements() / ne[0]; }
  uint64_t row_bytes() const { return ne.empty() ? 0 : dtype_row_bytes(type, ne[0]); }
};

}  // namespace ssd
