// The device halves of the tensor-parallel exchanges (Backend::allreduce_sum / gather_columns
// on the CUDA backend): NCCL moves every rank's bytes into a gathered buffer on the backend's
// stream, and these kernels finish the exchange there, in the same stream order, so a TP forward
// never returns to the host and can be captured in a CUDA graph with its exchanges inside.
// The arithmetic is kernels/common/exchange_math.h's, which the host sum (nccl_collective.cpp)
// also runs and the tests compare with gather_columns on the CPU. Not yet run on a GPU.
#include "kernels/common/exchange_math.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/kernels.cuh"

namespace ssd::cuda {
namespace {

constexpr int kThreads = 256;

unsigned blocks_for(int64_t count) {
  return static_cast<unsigned>((count + kThreads - 1) / kThreads);
}

// One thread per element.
__global__ void rank_order_sum_kernel(const float* gathered, int ranks, int64_t count,
                                      float* out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count) out[i] = kernels::hd::rank_order_sum(gathered, ranks, count, i);
}

// One thread per output element (row i, column c).
__global__ void stitch_columns_kernel(const float* gathered, const int64_t* off, int ranks,
                                      int64_t rows, float* out) {
  const int64_t width = off[ranks];
  const int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= rows * width) return;
  const int64_t i = e / width, c = e % width;
  out[e] = gathered[kernels::hd::stitch_source(off, ranks, rows, i, c)];
}

}  // namespace

void launch_rank_order_sum(const float* gathered, int ranks, int64_t count, float* out,
                           cudaStream_t s) {
  if (count <= 0) return;
  rank_order_sum_kernel<<<blocks_for(count), kThreads, 0, s>>>(gathered, ranks, count, out);
  SSD_CUDA_LAUNCHED();
}

void launch_stitch_columns(const float* gathered, const int64_t* off, int ranks, int64_t rows,
                           int64_t width, float* out, cudaStream_t s) {
  if (rows * width <= 0) return;
  stitch_columns_kernel<<<blocks_for(rows * width), kThreads, 0, s>>>(gathered, off, ranks, rows,
                                                                     out);
  SSD_CUDA_LAUNCHED();
}

}  // namespace ssd::cuda
