// The batch-invariant matmul: y[t, r] = sum_c W[r, c] x[t, c], x and y FP32, W in its stored type
// (F32, F16, BF16 or a GGML block type) decoded in registers by dequant_elem (dequant.h), one warp
// per output in the lane order of invariant_dot.h. That order depends on cols only, so token t's
// outputs are the same bits whatever n is and whatever other tokens share the call. That is what
// greedy speculative decoding needs from the target (a K+1-token verification must reproduce
// 1-token decodes); cuBLAS picks its algorithm (and split) per shape, so it is used only above
// the backend's invariant_max_tokens (prefill, on the BF16 copy). Reading the stored bytes rather
// than a BF16 copy is what decode is bound by: Q4_1 is 4.5 bits per weight against 16, and the
// products use the file's exact values (the CPU kernels' values, dequant.h). With 32 lanes and
// 32-element blocks a warp step reads one block, coalesced; each token re-reads its rows, which
// L2 absorbs for the small n of decode and verification. Its twin: hd::warp_order_dot over the
// same accessor (tests/unit/device_math/invariant_matmul_twin_test.cpp). Not yet run on a GPU.
#include "kernels/common/dequant.h"
#include "kernels/common/invariant_dot.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/kernels.cuh"

namespace ssd::cuda {
namespace {

constexpr int kWarpsPerBlock = 8;

// T is a compile-time type, so dequant_elem's switch folds away.
template <DType T>
__global__ void matmul_invariant_kernel(const uint8_t* w, uint64_t row_bytes, const float* x,
                                        float* y, int64_t n, int64_t rows, int64_t cols) {
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x % 32);
  if (warp >= n * rows) return;
  // Consecutive warps take consecutive rows of the same token: neighbours share x in L1.
  const int64_t t = warp / rows, r = warp % rows;
  const uint8_t* wr = w + static_cast<uint64_t>(r) * row_bytes;
  const float* xt = x + t * cols;
  float acc = kernels::hd::lane_dot([&](int64_t c) { return kernels::hd::dequant_elem(T, wr, c); },
                                    [&](int64_t c) { return xt[c]; }, cols, lane);
  for (int o = 16; o > 0; o /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, o);
  if (lane == 0) y[t * rows + r] = acc;
}

template <DType T>
void launch_typed(const uint8_t* w, uint64_t row_bytes, const float* x, float* y, int64_t n,
                  int64_t rows, int64_t cols, cudaStream_t s) {
  const int64_t warps = n * rows;
  const auto blocks = static_cast<unsigned>((warps + kWarpsPerBlock - 1) / kWarpsPerBlock);
  matmul_invariant_kernel<T><<<blocks, 32 * kWarpsPerBlock, 0, s>>>(w, row_bytes, x, y, n, rows,
                                                                    cols);
  SSD_CUDA_LAUNCHED();
}

}  // namespace

void launch_matmul_invariant(DType type, const uint8_t* w, uint64_t row_bytes, const float* x,
                             float* y, int64_t n, int64_t rows, int64_t cols, cudaStream_t s) {
  if (n * rows == 0) return;
  switch (type) {
    case DType::F32: return launch_typed<DType::F32>(w, row_bytes, x, y, n, rows, cols, s);
    case DType::F16: return launch_typed<DType::F16>(w, row_bytes, x, y, n, rows, cols, s);
    case DType::BF16: return launch_typed<DType::BF16>(w, row_bytes, x, y, n, rows, cols, s);
    case DType::Q4_0: return launch_typed<DType::Q4_0>(w, row_bytes, x, y, n, rows, cols, s);
    case DType::Q4_1: return launch_typed<DType::Q4_1>(w, row_bytes, x, y, n, rows, cols, s);
    case DType::Q8_0: return launch_typed<DType::Q8_0>(w, row_bytes, x, y, n, rows, cols, s);
    case DType::Q4_K: return launch_typed<DType::Q4_K>(w, row_bytes, x, y, n, rows, cols, s);
    case DType::Q6_K: return launch_typed<DType::Q6_K>(w, row_bytes, x, y, n, rows, cols, s);
  }
  cuda_fail("matmul_invariant: a weight type without a device decoder", cudaErrorInvalidValue,
            __FILE__, __LINE__);
}

}  // namespace ssd::cuda
