// Weight-matrix times activations on the CPU, for every weight type the loaders produce. One call
// multiplies n tokens and reads each weight once for all of them, which is what makes verifying
// K+1 tokens cost little more than decoding one. Rows are split across the thread pool.
//
// Two paths:
//   integer (block-quantized weights prepared with prepare_matmul_weight): the weights are
//     repacked once into 16-row tiles (packed_matrix.h) and the activations are quantized to
//     8 bits per 32-value block on every call (act_q8.h); products are exact integer dot
//     products (AVX-512 VNNI, AVX2, scalar), scaled and summed in float32 in one fixed order.
//   float (F32/F16/BF16, or a quantized matrix that was not prepared): the weights stay in their
//     file format and are decoded in registers, activations stay float32.
//
// Determinism: on both paths the output of token t is bitwise the same whatever n is, whatever
// other tokens are in the batch and however many threads run (speculative decoding's greedy
// exactness relies on it: a K+1-token verification forward must reproduce a 1-token decode).
// The integer path is moreover bitwise the same on every instruction set.
#pragma once

#include <cstdint>
#include <memory>

#include "runtime/core/dtype.h"

namespace ssd::kernels {

class ThreadPool;
struct PackedMatrix;

// A row-major weight matrix: `rows` output features, each a row of `cols` input values stored as
// `row_bytes` bytes of `type` (cols is a multiple of the type's block size).
struct WeightMatrix {
  DType type = DType::F32;
  const uint8_t* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  uint64_t row_bytes = 0;
  // The same weights repacked for the integer path (null: the float path reads `data`). `data`
  // stays valid for row lookups (embedding tables) either way.
  std::shared_ptr<const PackedMatrix> packed;
};

// w with its packed copy attached when its type has an integer kernel (Q4_0, Q4_1, Q8_0, Q4_K,
// Q6_K); otherwise w unchanged. The one preparation step per weight, done at load time; the
// bytes at w.data are only read.
WeightMatrix prepare_matmul_weight(const WeightMatrix& w);

// y[t, r] = sum_c W[r, c] * x[t, c] for t < n.   x: [n, cols]   y: [n, rows]
// pool may be null (runs on the calling thread). y must not overlap x or the weights.
void matmul(const WeightMatrix& w, const float* x, float* y, int64_t n, ThreadPool* pool);

// Scalar reference twin of the float path (float64 accumulation of the decoded weights times
// the float32 activations): the exact product the kernels approximate.
void matmul_ref(const WeightMatrix& w, const float* x, float* y, int64_t n);

// Scalar reference twin of the integer path, written from the file's block layout (not the
// packed one): the same activation quantization and the same float operations in the same
// order, so the integer kernels must equal it bit for bit. w.type must have an integer kernel.
void matmul_q8_ref(const WeightMatrix& w, const float* x, float* y, int64_t n);

}  // namespace ssd::kernels
