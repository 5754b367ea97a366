// The CUDA backend's public face, free of CUDA headers so that the front end can include it
// (it is compiled only when SSD_HAVE_CUDA; actors/roles/backend_choice.cpp is the one place
// that tests the macro).
//
// What runs where (cuda_backend_impl.h lists the file of each concern):
//   weights   uploaded once at prepare_weight in their stored type, plus a BF16 copy decoded
//             ON THE DEVICE by kernels/common/dequant.h (the same decoder as the CPU's) for the
//             cuBLAS path. Every type the loaders produce (F32, F16, BF16, Q4_0, Q4_1, Q8_0, Q4_K,
//             Q6_K) is supported. Choice: the BF16 copy doubles a Q4 model's memory but lets
//             cuBLAS run prefill.
//   matmul    y = x W^T with FP32 accumulation: for n <= invariant_max_tokens (decode,
//             verification, drafting) a batch-invariant kernel that decodes the stored bytes in
//             registers (one warp per output, fixed reduction order, kernels/cuda/matmul.cu), so a
//             K+1-token verification reproduces 1-token decodes bit for bit (greedy exactness)
//             and decode reads 4.5 bits per Q4_1 weight, not 16; cuBLAS GemmEx on the BF16 copy
//             (BF16 in, FP32 compute) above it (prefill).
//   KV cache  a device mirror of the host KvCache's pages (same page ids, same layout), kept in
//             step through KvPageObserver (copy on write, compaction); attention reads it through
//             the host page tables, uploaded per call. A mirror belongs to one cache object
//             (KvCache::id) and is freed once that cache is destroyed (kv_mirrors.h).
//             truncate, fork and release are host bookkeeping only (page tables, reference
//             counts): no device work and no transfer. Copy on write and compaction are
//             device-to-device copies queued on the stream, never a round trip through the host.
//             (The host cache still allocates, and copies on write, its own pages, which the
//             CUDA path never reads: memory and memcpy it could skip, not a transfer.)
//   activations  device memory from Backend::allocate. The Transformer and the Domino
//             backbone keep their activations there, so a decode step, a verification forward,
//             a drafter's tree forward or a Domino block pass enqueues its kernels on the
//             backend's one stream without waiting; it waits once, when it downloads the logits
//             rows (and the hidden rows asked for). Ops still take host pointers (staged: copied
//             in, and copied out with a wait), which is how the small per-step inputs arrive
//             (positions, norm gains, biases, RoPE frequencies, page tables, visible lists) and
//             how the early-exit drafter's and the Domino head's host rows still run.
//   tensor parallelism  with the NCCL transport (a StreamCollective on this device) the
//             exchanges are Backend ops on device memory: NCCL gathers every rank's block into
//             scratch on this backend's stream and a kernel finishes the exchange there (the
//             rank-order sum, the column stitching: exchange.cu), so a TP forward, like any other,
//             waits once, at its download, through NCCL's watchdog (a dead peer ends the job).
//             With MPI the defaults run: download, exchange on the host, upload.
//   sampling  not a Backend op: the decoding loops ask the target's TokenPicker
//             (runtime/generate/token_picker.h). On this backend it is the device picker
//             (device_token_picker.h): decode and verification forwards leave their logits rows
//             on the device (Batch::logits_in_backend), DeviceSampler samples them (greedy
//             argmax, or top-k / top-p / min-p / temperature with the CPU sampler's exact result)
//             and DeviceVerifier verifies them (device argmaxes for greedy trees; for sampled
//             trees, chains included, every row processed on the device and judged by
//             launch_verify_sampled_trees, verify_sampled.cu), all on this backend's stream;
//             only token ids, accepted paths and counts come back.
// CUDA graphs (cuda_graphs.h) in the forward: the Transformer marks each forward as a
// replayable region (Backend::begin_replayable) keyed by (model, cache, batch size, logits rows,
// hidden layers kept): a decode step at each batch size, a verification forward at each K (with
// the target features a drafter reads: they are copied aside on the device inside the region
// and downloaded after it), a drafter model's tree forward at each size; and each Domino
// backbone pass, keyed by its shape (domino_backbone.h). Per key the first forward runs
// eagerly and measures its host inputs, the second is captured, the rest replay: the ops run
// only their host parts (KV copy-on-write bookkeeping, page tables, QueryDesc, visible lists,
// positions, norm gains), which land in fixed slots of one pinned arena; end_replayable enqueues
// the deferred KV page copies, uploads the arena in one copy and launches the graph. Any
// allocate() makes the graphs stale (a graph bakes in addresses); they are captured again at the
// next use. CudaBackendOptions::graphs = false (SSD_CUDA_GRAPHS=off) keeps every op eager;
// graph_sizes limits the sizes captured (CudaGraphSet::decoder_sizes builds the usual set).
// Tensor-parallel forwards with NCCL are regions too, keyed with their group: NCCL requires a
// captured collective to be captured on every rank, so at begin_replayable the ranks agree
// (agree_min, one tiny exchange) on the least advanced state among them (eager, measure,
// capture, replay); the start-up warm-up runs through the TP leader's target, so every rank of
// the group captures the run's shapes before the first request. Still eager: prefill above
// invariant_max_tokens (cuBLAS), TP forwards over MPI, and the Domino head's walks (greedy: one
// fused kernel; sampled: a launch per position with the device sampler's kernels between,
// domino_sampled_walk.h; neither returns to the host before its end, neither is graphed; both
// multiply the head's matrices in their stored type: fused_walks.cpp). A
// run's repeated sizes are captured at start-up by running each twice on a scratch sequence
// (runtime/model/forward_warmup.h, called by LeaderJob::warm_up), so replay is the normal path
// from the first request; other sizes are captured at their second use.
// Status: compiled and linked here (CUDA 13, sm_80 / sm_90); never run on a GPU by this project.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/cuda/device_count.h"
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
  // CUDA graphs for the forwards the model marks replayable (Backend::begin_replayable; see
  // graph_replay.cpp): off runs every op eagerly (SSD_CUDA_GRAPHS=off in the environment, read
  // by actors/roles/backend_choice.cpp). graph_sizes: the batch sizes that may be captured
  // (e.g. CudaGraphSet::decoder_sizes(ks, tree batches)); empty = every size up to
  // invariant_max_tokens.
  bool graphs = true;
  std::vector<int64_t> graph_sizes;
};

// A backend on `opts.device`. Throws ssd::Error when the device cannot be used.
std::unique_ptr<Backend> make_cuda_backend(const CudaBackendOptions& opts);
inline std::unique_ptr<Backend> make_cuda_backend(int device) {
  return make_cuda_backend(CudaBackendOptions{.device = device});
}

// The stream every op of a CUDA backend runs on (a cudaStream_t) and its device, for device work
// outside the backend that must run in order with its forwards (DeviceTokenPicker reads the
// logits a forward left on the device). Throws ssd::Error when `be` is not a CUDA backend.
struct CudaBackendHandle {
  void* stream = nullptr;
  int device = 0;
};
CudaBackendHandle cuda_backend_handle(Backend& be);
// Forward shapes (ReplayKeys) whose CUDA graph is captured and current on `be` (0 for a backend
// that is not CUDA): what a start-up warm-up reports.
int64_t cuda_graphs_ready(Backend& be);

}  // namespace ssd
