// The batch-invariant matmul: y[t, r] = sum_c W[r, c] x[t, c] with W in BF16 and x, y in FP32,
// one warp per output. Lane l sums c = l, l + 32, ... in increasing order, then the lanes are
// combined by a butterfly: the order depends on cols only, so token t's outputs are the same bits
// whatever n is and whatever other tokens share the call. That is what greedy speculative
// decoding needs from the target (a K+1-token verification must reproduce 1-token decodes);
// cuBLAS picks its algorithm (and split) per shape, so it is used only above the backend's
// invariant_max_tokens (prefill). Weight reads are coalesced (a warp reads 64 contiguous bytes of
// a row per step); each token re-reads its rows, which L2 absorbs for the small n of decode and
// verification. Not yet run on a GPU.
#include "kernels/common/half_math.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/kernels.cuh"

namespace ssd::cuda {
namespace {

constexpr int kWarpsPerBlock = 8;

__global__ void matmul_invariant_kernel(const uint16_t* w, const float* x, float* y, int64_t n,
                                        int64_t rows, int64_t cols) {
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x % 32);
  if (warp >= n * rows) return;
  // Consecutive warps take consecutive rows of the same token: neighbours share x in L1.
  const int64_t t = warp / rows, r = warp % rows;
  const uint16_t* wr = w + r * cols;
  const float* xt = x + t * cols;
  float acc = 0.0f;
  for (int64_t c = lane; c < cols; c += 32)
    acc = fmaf(kernels::hd::bf16_to_fp32(wr[c]), xt[c], acc);
  for (int o = 16; o > 0; o /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, o);
  if (lane == 0) y[t * rows + r] = acc;
}

}  // namespace

void launch_matmul_invariant(const uint16_t* w, const float* x, float* y, int64_t n,
                             int64_t rows, int64_t cols, cudaStream_t s) {
  const int64_t warps = n * rows;
  if (warps == 0) return;
  const auto blocks = static_cast<unsigned>((warps + kWarpsPerBlock - 1) / kWarpsPerBlock);
  matmul_invariant_kernel<<<blocks, 32 * kWarpsPerBlock, 0, s>>>(w, x, y, n, rows, cols);
  SSD_CUDA_LAUNCHED();
}

}  // namespace ssd::cuda
