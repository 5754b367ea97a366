// The CUDA backend's public face, free of CUDA headers so that the front end can include it
// (it is compiled only when SSD_HAVE_CUDA; actors/frontend/backend_choice.cpp is the one place
// that tests the macro).
//
// What runs where (kernels/cuda/cuda_backend.cpp has the details):
//   weights   uploaded once at prepare_weight and dequantized ON THE DEVICE to BF16 by
//             kernels/common/dequant.h (the same decoder as the CPU's), so every weight type the
//             loaders produce (F32, F16, BF16, Q4_0, Q4_1, Q8_0, Q4_K, Q6_K) runs through one
//             BF16 GEMM path. Choice: BF16 storage doubles a Q4 model's memory but lets cuBLAS run
//             prefill; a fused dequantizing GEMV for Q4 decode is a later optimisation.
//   matmul    y = x W^T with FP32 accumulation: a batch-invariant kernel (one warp per output,
//             fixed reduction order) for n <= invariant_max_tokens, so a K+1-token verification
//             reproduces 1-token decodes bit for bit (greedy exactness); cuBLAS GemmEx (BF16 in,
//             FP32 compute) above it (prefill).
//   KV cache  a device mirror of the host KvCache's pages (same page ids, same layout), kept in
//             step through KvPageObserver (copy on write, compaction); attention reads it through
//             the host page tables, uploaded per call.
//   activations  the Backend interface passes float pointers; device pointers are used in place,
//             host pointers are staged (copied in and out around the op). The Transformer keeps
//             its activations on the host today, so a whole forward works but pays a copy per op.
//   sampling  not a Backend op: the decoding loops sample from the host logits the forward
//             returns. DeviceSampler (device_sampler.h) does top-k / top-p / min-p / temperature
//             sampling on the device with the CPU sampler's exact result, ready for when the
//             logits stay on the device.
// CUDA graphs (cuda_graphs.h) are not in the forward yet. What blocks capture, op by op:
//   - staging: every op asks cudaPointerGetAttributes, copies host activations in and out from
//     pageable memory and ends with cudaStreamSynchronize; capture forbids all three;
//   - the Transformer's residual stream, scratch and logits are host std::vectors, so every op
//     receives host pointers;
//   - per-step inputs are built on the host inside the ops (store_kv's copy-on-write bookkeeping
//     and pool offsets, attention's flattened page tables / QueryDesc / visible lists) and
//     uploaded through staging buffers whose addresses change; a graph bakes addresses in;
//   - tensor parallelism exchanges between ops through Collective on host buffers (MPI), which
//     cannot be captured (NCCL collectives on the backend's stream could be).
// The plan: (1) a Backend call that allocates activation memory (host on the CPU, device here),
// so the Transformer's buffers live on the device and every op takes them in place; (2) split
// store_kv / attention into a host prepare, run once per step before any kernel (CoW page
// copies enqueued, tables and offsets written into fixed pinned buffers, one async upload into
// fixed device buffers), and a device part that only reads those buffers; (3) one sync per
// forward instead of per op, logits left on the device for DeviceSampler; (4) then capture the
// device part once per size of CudaGraphSet::decoder_sizes(K's, tree batches) at start-up and
// replay it (n <= invariant_max_tokens, so no cuBLAS in the captured sizes); prefill stays eager.
// Status: compiled and linked here (CUDA 13, sm_80 / sm_90); never run on a GPU by this project.
#pragma once

#include <cstdint>
#include <memory>

#include "runtime/backend/backend.h"

namespace ssd {

struct CudaBackendOptions {
  int device = 0;
  // Largest n for which matmul uses the batch-invariant kernel (see above). Verification and
  // decode batches must stay at or below it for greedy SD to equal AR on this backend.
  int64_t invariant_max_tokens = 256;
};

// Number of usable CUDA devices; 0 when there is no driver, no device or any error. Never throws.
int cuda_device_count() noexcept;

// A backend on `opts.device`. Throws ssd::Error when the device cannot be used.
std::unique_ptr<Backend> make_cuda_backend(const CudaBackendOptions& opts);
inline std::unique_ptr<Backend> make_cuda_backend(int device) {
  return make_cuda_backend(CudaBackendOptions{.device = device});
}

}  // namespace ssd
