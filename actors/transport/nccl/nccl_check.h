// SSD_NCCL_CHECK: the NCCL layer's use of the GPU layers' one error model
// (kernels/cuda/cuda_check.h, whose SSD_CUDA_CHECK this layer uses for its CUDA runtime calls):
// a failing call throws ssd::Error naming the call, NCCL's own description and the location.
// With the non-blocking communicators this layer creates, ncclInProgress is not a failure: the
// call was accepted and its completion is observed through ncclCommGetAsyncError (see
// nccl_comm.h).
#pragma once

#include <nccl.h>

#include "kernels/cuda/cuda_check.h"

#define SSD_NCCL_CHECK(call)                                                              \
  do {                                                                                    \
    const ncclResult_t ssd_nccl_rc_ = (call);                                             \
    if (ssd_nccl_rc_ != ncclSuccess && ssd_nccl_rc_ != ncclInProgress)                    \
      ::ssd::cuda::gpu_call_failed("NCCL", #call, static_cast<int>(ssd_nccl_rc_),         \
                                   ncclGetErrorString(ssd_nccl_rc_), __FILE__, __LINE__); \
  } while (0)
