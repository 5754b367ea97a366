// Out-of-line failure functions of kernels/cuda/cuda_check.h (see there for why out of line),
// and the device probe, which must never throw or crash: a CUDA-built binary on a machine
// without a driver or a GPU asks it first and falls back to the CPU.
#include "kernels/cuda/cuda_check.h"

#include "kernels/cuda/cuda_backend.h"
#include "runtime/core/error.h"

namespace ssd {
namespace cuda {

void cuda_fail(const char* what, cudaError_t e, const char* file, int line) {
  fail(fmt::format("CUDA error in {}: {} ({}) at {}:{}", what, cudaGetErrorString(e),
                   static_cast<int>(e), file, line));
}

void cublas_fail(const char* what, cublasStatus_t s, const char* file, int line) {
  fail(fmt::format("cuBLAS error in {}: {} ({}) at {}:{}", what, cublasGetStatusString(s),
                   static_cast<int>(s), file, line));
}

}  // namespace cuda

// Weak for now: actors/transport/nccl/nccl_comm.cpp defines the same probe (same contract) and
// both libraries are linked into ssd_actors; the linker keeps one. One of the two definitions
// should go when the lead merges the GPU libraries (see the C1 report).
[[gnu::weak]] int cuda_device_count() noexcept {
  int n = 0;
  // No driver: cudaErrorInsufficientDriver / cudaErrorNoDevice; either way, no usable device.
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky-free error so later probes start clean
    return 0;
  }
  return n < 0 ? 0 : n;
}

}  // namespace ssd
