// Tensor payloads for the test model writers: deterministic pseudo-random values (so a test's
// model is the same on every run and machine) and float -> on-disk encoding for any DType through
// the kernels' reference quantizers, row by row, exactly as a converter would store them; and the
// description of such a matrix in memory (matrix_ref).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "runtime/core/dtype.h"
#include "runtime/io/tensor_ref.h"

namespace ssd::test {

// n values uniform in [-scale, scale), a pure function of (n, seed, scale).
std::vector<float> random_floats(size_t n, uint64_t seed, float scale = 1.0f);

// Encodes `values` (rows of `row_len` values, row-major) as type t. row_len must be a multiple of
// t's block size and values.size() a multiple of row_len; throws ssd::Error otherwise.
std::vector<uint8_t> encode_tensor(DType t, std::span<const float> values, uint64_t row_len);

// A [rows, cols] matrix of type t stored at `data` (rows x the type's row size for cols values),
// described as a loader would (name "w"), for Backend::prepare_weight.
TensorRef matrix_ref(DType t, const void* data, int64_t rows, int64_t cols);

}  // namespace ssd::test
