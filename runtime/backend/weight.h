// A weight matrix as the engine hands it to a backend's ops: what the file holds (type, shape,
// row size) and where the bytes are, plus the backend's own prepared form. Backend::
// prepare_weight() makes one at start-up; after that the model code passes it to matmul/embed
// and never looks inside `prepared`. The CPU backend keeps, for block-quantized types, the mapped
// file's bytes in `data` (embedding rows) and its 16-row integer tiles in `prepared`, and for the
// float path a copy of the rows in huge pages, which `data` points at; the CUDA backend points
// `data` at device bytes that only it reads.
#pragma once

#include <cstdint>
#include <memory>

#include "runtime/core/dtype.h"

namespace ssd {

// `rows` output features, each a row of `cols` input values stored as `row_bytes` bytes of
// `type` (cols is a multiple of the type's block size).   logical shape: [rows, cols]
struct Weight {
  DType type = DType::F32;
  const uint8_t* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  uint64_t row_bytes = 0;
  std::shared_ptr<const void> prepared;  // the preparing backend's form; null when it has none
};

}  // namespace ssd
