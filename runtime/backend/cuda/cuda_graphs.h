// CUDA graphs by size: a forward of a given shape (the 1-token decode step, the verification
// forward at each K, the drafter's tree decode at each batch size) is captured once at start-up
// and replayed by size afterwards, so a step costs one graph launch instead of hundreds of
// kernel launches.
//
// Contract of a captured function: it only enqueues work on the stream it is given (kernels,
// async copies between fixed device buffers, cuBLAS calls bound to that stream), never
// synchronises, allocates or copies from pageable host memory, and reads its per-step inputs
// (tokens, positions, page tables, masks) from device buffers whose addresses do not change;
// the caller refreshes those buffers' contents before each replay. CudaBackend captures its
// forwards through begin_capture / end_capture (ops are called one by one between them, not as
// one function; see graph_replay.cpp). Not yet run on a GPU.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <map>
#include <vector>

namespace ssd::cuda {

class CudaGraphSet {
 public:
  using Enqueue = std::function<void(cudaStream_t stream, int64_t size)>;

  explicit CudaGraphSet(cudaStream_t stream) : stream_(stream) {}
  ~CudaGraphSet();
  CudaGraphSet(const CudaGraphSet&) = delete;
  CudaGraphSet& operator=(const CudaGraphSet&) = delete;

  // Captures enqueue(stream, size) as the graph of `size` (replacing one captured before).
  // Throws ssd::Error, with the capture ended and nothing kept, if enqueue throws or breaks the
  // contract above.
  void capture(int64_t size, const Enqueue& enqueue);
  // The start-up capture: one graph per size.
  void capture_all(const std::vector<int64_t>& sizes, const Enqueue& enqueue);
  // The same capture in two calls, for work enqueued by many calls in between (on this thread):
  // begin_capture starts capturing the stream; end_capture keeps the graph as `size`;
  // abort_capture ends it and keeps nothing (never throws).
  void begin_capture();
  void end_capture(int64_t size);
  void abort_capture() noexcept;

  bool has(int64_t size) const { return graphs_.count(size) != 0; }
  std::vector<int64_t> sizes() const;
  // Launches the graph of `size` on the stream (asynchronous). Throws if none was captured.
  void replay(int64_t size);

  // The sizes a speculative decoder needs: 1 (decode), k + 1 for each verification length k,
  // and b * (k + 1) for each drafter tree batch b (Saguaro's branches x positions), sorted,
  // without duplicates.
  static std::vector<int64_t> decoder_sizes(const std::vector<int64_t>& ks,
                                            const std::vector<int64_t>& tree_batches);

 private:
  cudaStream_t stream_;
  std::map<int64_t, cudaGraphExec_t> graphs_;
};

}  // namespace ssd::cuda
