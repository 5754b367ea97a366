// Out-of-line failure functions of kernels/cuda/cuda_check.h (see there for why out of line),
// and the one device probe of the binary (the backend choice, the GPU placement and the NCCL
// transport all ask it), which must never throw or crash: a CUDA-built binary on a machine
// without a driver or a GPU asks it first and falls back to the CPU.
#include "kernels/cuda/cuda_check.h"

#include "kernels/cuda/device_count.h"
#include "runtime/core/error.h"

namespace ssd {
namespace cuda {

void gpu_call_failed(const char* library, const char* call, int code, const char* description,
                     const char* file, int line) {
  fail(fmt::format("{} error in {}: {} ({}) at {}:{}", library, call, description, code, file,
                   line));
}

void cuda_fail(const char* what, cudaError_t e, const char* file, int line) {
  gpu_call_failed("CUDA", what, static_cast<int>(e), cudaGetErrorString(e), file, line);
}

void cublas_fail(const char* what, cublasStatus_t s, const char* file, int line) {
  gpu_call_failed("cuBLAS", what, static_cast<int>(s), cublasGetStatusString(s), file, line);
}

}  // namespace cuda

int cuda_device_count() noexcept {
  int n = 0;
  // No driver: cudaErrorInsufficientDriver / cudaErrorNoDevice; either way, no usable device.
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky-free error so later probes start clean
    return 0;
  }
  return n < 0 ? 0 : n;
}

}  // namespace ssd
