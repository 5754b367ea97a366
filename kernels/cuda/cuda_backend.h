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
//   activations  device memory from Backend::allocate. The Transformer (and the Domino
//             backbone's block scratch) keep their activations there, so a decode step, a
//             verification forward or a drafter's tree forward enqueues its kernels on the
//             backend's one stream without waiting; the forward waits once, when it downloads the
//             logits rows (and the hidden layers the batch asked for). Ops still take host
//             pointers (staged: copied in, and copied out with a wait), which is how the small
//             per-step inputs arrive (positions, norm gains, biases, RoPE frequencies, page
//             tables, visible lists) and how the Domino backbone's host residual stream and the
//             early-exit drafter's host rows still run.
//   tensor parallelism  the exchanges between ops run on host buffers (Collective), so a TP
//             rank downloads and uploads around each one (Transformer: 2 or 4 per block).
//   sampling  not a Backend op: the decoding loops sample from the host logits the forward
//             returns. DeviceSampler (device_sampler.h) does top-k / top-p / min-p / temperature
//             sampling on the device with the CPU sampler's exact result, ready for when the
//             logits stay on the device.
// CUDA graphs (cuda_graphs.h) are not in the forward yet. What still blocks capture:
//   - staging: ops given host pointers ask cudaPointerGetAttributes and copy from pageable
//     memory into staging buffers whose addresses change; capture forbids both. The per-step
//     inputs (positions, store_kv's pool offsets, attention's page tables / QueryDesc / visible
//     lists) are built on the host inside the ops, and the gains / biases / RoPE frequencies are
//     host vectors of the model;
//   - tensor parallelism exchanges through Collective on host buffers (MPI), which cannot be
//     captured (NCCL collectives on the backend's stream could be).
// The plan from here: (1) the small constant vectors prepared once into backend memory like the
// weights; (2) split store_kv / attention into a host prepare, run once per step before any
// kernel (CoW page copies enqueued, tables and offsets written into fixed pinned buffers, one
// async upload into fixed device buffers), and a device part that only reads those buffers;
// (3) capture the device part once per size of CudaGraphSet::decoder_sizes(K's, tree batches) at
// start-up and replay it (n <= invariant_max_tokens, so no cuBLAS in the captured sizes);
// prefill stays eager; (4) logits left on the device for DeviceSampler.
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
  // Wait for the stream after every op, so a failing kernel is reported at the op that launched
  // it (debugging); by default only downloads and ops with host outputs wait.
  bool sync_each_op = false;
};

// Number of usable CUDA devices; 0 when there is no driver, no device or any error. Never throws.
int cuda_device_count() noexcept;

// A backend on `opts.device`. Throws ssd::Error when the device cannot be used.
std::unique_ptr<Backend> make_cuda_backend(const CudaBackendOptions& opts);
inline std::unique_ptr<Backend> make_cuda_backend(int device) {
  return make_cuda_backend(CudaBackendOptions{.device = device});
}

}  // namespace ssd
