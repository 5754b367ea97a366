// The GPU layers' one error model: every CUDA runtime and cuBLAS call goes through
// SSD_CUDA_CHECK / SSD_CUBLAS_CHECK (and every NCCL call through SSD_NCCL_CHECK,
// actors/transport/nccl/nccl_check.h), which throw ssd::Error naming the library, the call, the
// error and the place (the runtime layer's model, runtime/core/error.h) through the one
// gpu_call_failed(); every kernel launch is followed by SSD_CUDA_LAUNCHED() (cudaGetLastError).
// The failure function is out of line (cuda_check.cpp) because nvcc cannot compile fmt's
// compile-time format checks: .cu files never format, and argument checks with SSD_CHECK live in
// the host .cpp files that call the launchers.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

namespace ssd::cuda {

// Throws ssd::Error "<library> error in <call>: <description> (<code>) at <file>:<line>".
[[noreturn]] void gpu_call_failed(const char* library, const char* call, int code,
                                  const char* description, const char* file, int line);
[[noreturn]] void cuda_fail(const char* what, cudaError_t e, const char* file, int line);
[[noreturn]] void cublas_fail(const char* what, cublasStatus_t s, const char* file, int line);

}  // namespace ssd::cuda

#define SSD_CUDA_CHECK(call)                                                             \
  do {                                                                                   \
    const cudaError_t ssd_e_ = (call);                                                   \
    if (ssd_e_ != cudaSuccess) ::ssd::cuda::cuda_fail(#call, ssd_e_, __FILE__, __LINE__); \
  } while (0)

#define SSD_CUBLAS_CHECK(call)                                             \
  do {                                                                     \
    const cublasStatus_t ssd_s_ = (call);                                  \
    if (ssd_s_ != CUBLAS_STATUS_SUCCESS)                                   \
      ::ssd::cuda::cublas_fail(#call, ssd_s_, __FILE__, __LINE__);         \
  } while (0)

#define SSD_CUDA_LAUNCHED() SSD_CUDA_CHECK(cudaGetLastError())
