// Weight-matrix times activations on the CPU, for every weight type the loaders produce. The
// weights stay in their file format (quantized blocks are decoded in registers, never expanded
// to a float copy of the matrix); activations are float32. One call multiplies n tokens and reads
// each weight row once for all of them, which is what makes verifying K+1 tokens cost little more
// than decoding one. Rows are split across the thread pool.
#pragma once

#include <cstdint>

#include "runtime/core/dtype.h"

namespace ssd::kernels {

class ThreadPool;

// A row-major weight matrix: `rows` output features, each a row of `cols` input values stored as
// `row_bytes` bytes of `type` (cols is a multiple of the type's block size).
struct WeightMatrix {
  DType type = DType::F32;
  const uint8_t* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  uint64_t row_bytes = 0;
};

// y[t, r] = sum_c W[r, c] * x[t, c] for t < n.   x: [n, cols]   y: [n, rows]
// pool may be null (runs on the calling thread). y must not overlap x or the weights.
void matmul(const WeightMatrix& w, const float* x, float* y, int64_t n, ThreadPool* pool);

// Scalar reference twin of matmul (float64 accumulation), for tests.
void matmul_ref(const WeightMatrix& w, const float* x, float* y, int64_t n);

}  // namespace ssd::kernels
