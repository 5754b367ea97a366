// Baseline (SSE2-only x86-64) kernels: used on CPUs without AVX2+FMA and as the lowest rung of
// force_isa. They decode a tile of 256 values at a time with the reference decoder into a stack
// buffer (never the whole row, never the matrix) and take float32 dot products over it with
// eight partial sums, which the compiler vectorises with SSE.
#include "kernels/cpu/rowops_table.h"

namespace ssd::kernels::detail {
namespace {

constexpr int64_t kTile = 256;  // a multiple of every block size

float dot_tile(const float* w, const float* x, int64_t n) {
  float acc[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) acc[k] += w[i + k] * x[i + k];
  float tail = 0.0f;
  for (; i < n; ++i) tail += w[i] * x[i];
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7])) + tail;
}

template <DType T>
void dequantize(const uint8_t* row, float* dst, int64_t n) {
  ref::dequantize_row(T, row, dst, n);
}

template <DType T>
void dot(const uint8_t* row, const float* x, int64_t x_stride, int n_tok, int64_t n, float* out) {
  const auto& tr = dtype_traits(T);
  float w[kTile];
  float acc[kMaxDotTokens] = {};
  for (int64_t i = 0; i < n; i += kTile) {
    const int64_t len = n - i < kTile ? n - i : kTile;
    ref::dequantize_row(T, row + i / tr.block_elems * tr.block_bytes, w, len);
    for (int t = 0; t < n_tok; ++t) acc[t] += dot_tile(w, x + t * x_stride + i, len);
  }
  for (int t = 0; t < n_tok; ++t) out[t] = acc[t];
}

template <DType T>
constexpr TypeKernels kKernels{dequantize<T>, dot<T>};

}  // namespace

const TypeKernels* scalar_kernels(DType t) {
  switch (t) {
    case DType::F32:
      return &kKernels<DType::F32>;
    case DType::F16:
      return &kKernels<DType::F16>;
    case DType::BF16:
      return &kKernels<DType::BF16>;
    case DType::Q8_0:
      return &kKernels<DType::Q8_0>;
    case DType::Q4_0:
      return &kKernels<DType::Q4_0>;
    case DType::Q4_1:
      return &kKernels<DType::Q4_1>;
    case DType::Q4_K:
      return &kKernels<DType::Q4_K>;
    case DType::Q6_K:
      return &kKernels<DType::Q6_K>;
  }
  return nullptr;
}

}  // namespace ssd::kernels::detail
