// Tensor element types. The numeric values are GGML's type ids (the GGUF on-disk tag), so a GGUF
// tensor's type field maps to a DType with a range check and nothing else. Quantized types store
// fixed-size blocks of `block_elems` values in `block_bytes` bytes; a row of a weight matrix is
// always a whole number of blocks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace ssd {

enum class DType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q8_0 = 8,
  Q4_K = 12,
  Q6_K = 14,
  BF16 = 30,
};

struct DTypeTraits {
  DType type;
  std::string_view name;
  uint32_t block_elems;  // values per block (1 for plain floats)
  uint32_t block_bytes;  // bytes per block
};

// Traits of a supported type; nullopt for a GGML id this project does not support.
std::optional<DTypeTraits> dtype_traits_from_ggml_id(uint32_t id);
const DTypeTraits& dtype_traits(DType t);
inline std::string_view dtype_name(DType t) { return dtype_traits(t).name; }
inline bool dtype_is_quantized(DType t) { return dtype_traits(t).block_elems > 1; }

// Bytes needed for `elems` values of type t; elems must be a multiple of the block size
// (callers check that first and report the tensor by name).
inline uint64_t dtype_row_bytes(DType t, uint64_t elems) {
  const auto& tr = dtype_traits(t);
  return elems / tr.block_elems * tr.block_bytes;
}

}  // namespace ssd
