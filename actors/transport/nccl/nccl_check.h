// SSD_NCCL_CHECK / SSD_NCCL_CUDA_CHECK: the NCCL layer's one error model. A failing call throws
// ssd::Error naming the call, NCCL's (or CUDA's) own description and the location. With the
// non-blocking communicators this layer creates, ncclInProgress is not a failure: the call was
// accepted and its completion is observed through ncclCommGetAsyncError (see nccl_comm.h).
// (kernels/cuda has its own CUDA check for the backend; this one keeps the transport independent
// of it.)
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

namespace ssd {

[[noreturn]] void throw_nccl_error(ncclResult_t code, const char* call, const char* file,
                                   int line);
[[noreturn]] void throw_cuda_error(cudaError_t code, const char* call, const char* file,
                                   int line);

}  // namespace ssd

#define SSD_NCCL_CHECK(call)                                                             \
  do {                                                                                   \
    const ncclResult_t ssd_nccl_rc_ = (call);                                            \
    if (ssd_nccl_rc_ != ncclSuccess && ssd_nccl_rc_ != ncclInProgress)                   \
      ::ssd::throw_nccl_error(ssd_nccl_rc_, #call, __FILE__, __LINE__);                  \
  } while (0)

#define SSD_NCCL_CUDA_CHECK(call)                                                        \
  do {                                                                                   \
    const cudaError_t ssd_cuda_rc_ = (call);                                             \
    if (ssd_cuda_rc_ != cudaSuccess)                                                     \
      ::ssd::throw_cuda_error(ssd_cuda_rc_, #call, __FILE__, __LINE__);                  \
  } while (0)
