// Packing processed rows into CSR lists: launch_process_row leaves each row's kept candidates at
// the start of its own [n]-wide slot (ids, probs) with the count in its RowStats; the chain
// verifier (verify_sampled.cu) reads the rows as one CSR array. One block per row: its offset is
// the sum of the counts of the rows before it (a few tens of rows, summed by every thread of the
// block rather than by a separate scan launch), then its entries are copied in order. No host
// round trip between processing and verifying. Not yet run on a GPU.
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_sampler_kernels.cuh"

namespace ssd::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void pack_rows_kernel(const RowStats* stats, int32_t rows, int64_t stride,
                                 const int32_t* ids, const double* probs, int64_t* off,
                                 int32_t* packed_ids, double* packed_probs) {
  const int32_t r = static_cast<int32_t>(blockIdx.x);
  int64_t base = 0;
  for (int32_t j = 0; j < r; ++j) base += stats[j].keep;
  const int64_t keep = stats[r].keep;
  if (threadIdx.x == 0) {
    off[r] = base;
    if (r == rows - 1) off[rows] = base + keep;
  }
  const int32_t* src_ids = ids + static_cast<int64_t>(r) * stride;
  const double* src_probs = probs + static_cast<int64_t>(r) * stride;
  for (int64_t i = threadIdx.x; i < keep; i += blockDim.x) {
    packed_ids[base + i] = src_ids[i];
    packed_probs[base + i] = src_probs[i];
  }
}

}  // namespace

void launch_pack_rows(const RowStats* stats, int32_t rows, int64_t stride, const int32_t* ids,
                      const double* probs, int64_t* off, int32_t* packed_ids,
                      double* packed_probs, cudaStream_t st) {
  if (rows <= 0) return;
  pack_rows_kernel<<<static_cast<unsigned>(rows), kThreads, 0, st>>>(
      stats, rows, stride, ids, probs, off, packed_ids, packed_probs);
  SSD_CUDA_LAUNCHED();
}

}  // namespace ssd::cuda
