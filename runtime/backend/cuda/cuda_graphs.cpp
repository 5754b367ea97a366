// CudaGraphSet (see cuda_graphs.h).
#include "runtime/backend/cuda/cuda_graphs.h"

#include <algorithm>

#include "kernels/cuda/cuda_check.h"
#include "runtime/core/error.h"

namespace ssd::cuda {

CudaGraphSet::~CudaGraphSet() {
  for (auto& [size, exec] : graphs_) (void)cudaGraphExecDestroy(exec);
}

void CudaGraphSet::capture(int64_t size, const Enqueue& enqueue) {
  SSD_CHECK(size > 0, "cuda graph: size {} must be positive", size);
  begin_capture();
  try {
    enqueue(stream_, size);
  } catch (...) {
    abort_capture();
    throw;
  }
  end_capture(size);
}

void CudaGraphSet::begin_capture() {
  SSD_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
}

void CudaGraphSet::abort_capture() noexcept {
  cudaGraph_t graph = nullptr;
  (void)cudaStreamEndCapture(stream_, &graph);  // ends the (possibly invalid) capture
  if (graph) (void)cudaGraphDestroy(graph);
  (void)cudaGetLastError();
}

void CudaGraphSet::end_capture(int64_t size) {
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(stream_, &graph);
  if (ended != cudaSuccess || size <= 0) {  // nothing kept
    if (graph) (void)cudaGraphDestroy(graph);
    SSD_CUDA_CHECK(ended);
    SSD_CHECK(size > 0, "cuda graph: size {} must be positive", size);
  }
  cudaGraphExec_t exec = nullptr;
  const cudaError_t e = cudaGraphInstantiate(&exec, graph, 0);
  (void)cudaGraphDestroy(graph);
  SSD_CUDA_CHECK(e);
  auto it = graphs_.find(size);
  if (it != graphs_.end()) {
    (void)cudaGraphExecDestroy(it->second);
    it->second = exec;
  } else {
    graphs_.emplace(size, exec);
  }
}

void CudaGraphSet::capture_all(const std::vector<int64_t>& sizes, const Enqueue& enqueue) {
  for (const int64_t s : sizes) capture(s, enqueue);
}

std::vector<int64_t> CudaGraphSet::sizes() const {
  std::vector<int64_t> out;
  for (const auto& [size, exec] : graphs_) out.push_back(size);
  return out;
}

void CudaGraphSet::replay(int64_t size) {
  auto it = graphs_.find(size);
  SSD_CHECK(it != graphs_.end(), "cuda graph: no graph captured for size {}", size);
  SSD_CUDA_CHECK(cudaGraphLaunch(it->second, stream_));
}

std::vector<int64_t> CudaGraphSet::decoder_sizes(const std::vector<int64_t>& ks,
                                                 const std::vector<int64_t>& tree_batches) {
  std::vector<int64_t> out = {1};
  for (const int64_t k : ks) {
    SSD_CHECK(k > 0, "cuda graph: draft length {} must be positive", k);
    out.push_back(k + 1);
    for (const int64_t b : tree_batches) {
      SSD_CHECK(b > 0, "cuda graph: tree batch {} must be positive", b);
      out.push_back(b * (k + 1));
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace ssd::cuda
