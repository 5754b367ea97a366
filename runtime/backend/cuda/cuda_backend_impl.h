// CudaBackend, the class behind make_cuda_backend (cuda_backend.h says what runs where and why).
// Private to runtime/backend/cuda: its members are defined in one file per concern,
//   cuda_backend.cpp   lifetime, memory (allocate / upload / download / copy), weights and the
//                      elementwise and matmul ops
//   kv_attention.cpp   store_kv and attention over the device KV mirrors (device_kv.h)
//   tp_exchange.cpp    the tensor-parallel exchanges on device memory and their watchdog wait
//   graph_replay.cpp   replayable regions: measure, capture and replay as CUDA graphs
//   fused_walks.cpp    the fused Domino head walk (greedy kernel, or the sampled walk)
// Every op runs on the backend's one stream, so ops are ordered as the Transformer calls them.
// The current CUDA device is per host thread, and a drafter rank drafts on its compute thread,
// not the thread that built the backend: every op (and every KV page copy) first makes this
// backend's device current (enter()), so a rank on device 4 never launches on device 0.
// Compiled here against CUDA 13 (no GPU on the build machine): not yet run on a device.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "kernels/cuda/device_buffer.h"
#include "runtime/backend/backend.h"
#include "runtime/backend/cuda/cuda_backend.h"
#include "runtime/backend/cuda/cuda_graphs.h"
#include "runtime/backend/cuda/device_kv.h"
#include "runtime/backend/cuda/domino_sampled_walk.h"
#include "runtime/backend/cuda/kv_mirrors.h"
#include "runtime/backend/cuda/staging.h"
#include "runtime/parallel/stream_collective.h"

namespace ssd::cuda {

// A prepared weight on the device.
struct DeviceWeight {
  DeviceBuffer raw;   // the file's bytes, [rows, row_bytes]
  DeviceBuffer bf16;  // [rows, cols] BF16
};

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(const CudaBackendOptions& o);
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  // For device code that runs in stream order with the ops (cuda_backend_handle).
  cudaStream_t stream() const { return stream_; }
  int device() const { return opts_.device; }
  // Replayable regions whose graph is captured and current (cuda_graphs_ready).
  int64_t graphs_ready() const;

  const char* name() const override { return "cuda"; }
  int threads() const override { return 1; }

  // Memory (cuda_backend.cpp).
  BackendBuffer allocate(size_t bytes) override;
  void upload(void* dst, const void* src, size_t bytes) override;
  void download(void* dst, const void* src, size_t bytes) override;
  void copy(void* dst, const void* src, size_t bytes) override;
  Weight prepare_weight(const TensorRef& t) override;

  // Ops (cuda_backend.cpp).
  void matmul(const Weight& w, const float* x, float* y, int64_t n) override;
  void embed(const Weight& table, const int32_t* tokens, int64_t n, float* out) override;
  void rmsnorm(const float* x, const float* g, float* y, int64_t rows, int64_t dim,
               float eps) override;
  void rope(float* x, int64_t n, int64_t n_heads, int64_t head_dim, int64_t rot_dim,
            const int32_t* positions, const float* inv_freq, RopeLayout layout) override;
  void swiglu(const float* gate, const float* up, float* out, int64_t count) override;
  void add(float* y, const float* x, int64_t count) override;
  void add_bias(float* y, const float* b, int64_t rows, int64_t cols) override;

  // KV cache and attention (kv_attention.cpp).
  void store_kv(KvCache& cache, int64_t layer, const SeqId* seqs, const int64_t* cache_pos,
                const float* k, const float* v, int64_t n) override;
  void attention(const AttentionCall& c) override;

  // Tensor-parallel exchanges (tp_exchange.cpp). When the group's transport moves this
  // device's memory itself (a StreamCollective on this device: NCCL), the bytes are gathered
  // into `scratch` on this stream and finished by a kernel (exchange.cu), with no host round
  // trip, and the ops are recorded in replayable regions like any other (the group agrees on
  // replaying: begin_replayable). Otherwise the defaults' host round trip (download,
  // Collective, upload), which a region may not contain.
  bool exchanges_replayable(Collective& comm) override { return device_exchange(comm) != nullptr; }
  void allreduce_sum(Collective& comm, float* y, int64_t count, float* scratch) override;
  void gather_columns(Collective& comm, const float* local, int64_t rows,
                      const std::vector<int64_t>& off, float* out, float* scratch) override;
  void wait_exchanges() override;

  // The fused Domino walk (fused_walks.cpp).
  bool has_domino_walk() const override { return true; }
  void domino_walk(const DominoWalkCall& c) override;

  // Replayable regions (graph_replay.cpp).
  void begin_replayable(const ReplayKey& key) override;
  void end_replayable() override;
  void abort_replayable() noexcept override;

 private:
  enum class Region { None, Eager, Measure, Capture, Replay };
  // What the graph of one ReplayKey needs (see graph_replay.cpp).
  struct StepGraph {
    int64_t id = 0;               // its CudaGraphSet size key
    size_t arena_bytes = 0;       // measured; 0 = not yet
    uint64_t measured_epoch = 0;  // allocation epoch of the measuring run
    bool captured = false;
    uint64_t epoch = 0;       // allocation epoch it was captured in
    bool eager_only = false;  // its capture or replay failed once: never graphed again
  };
  // The group's stream interface when it can exchange this device's memory, else null.
  StreamCollective* device_exchange(Collective& comm) const;
  // False while a region replays: ops run their host part only (the graph has the kernels).
  bool live() const { return region_ != Region::Replay; }
  bool graph_size_allowed(int64_t n) const;
  void set_kv_deferred(bool on);
  void flush_kv();
  void leave_region() noexcept;

  // First call of every op: this backend's device current on the calling thread, no staged
  // pointers left from a previous op.
  // Outside regions, it also frees the mirrors of KV caches destroyed since the last op.
  void enter();
  const DeviceWeight& weight(const Weight& w) const;
  DeviceKv& mirror(KvCache& cache);

  CudaBackendOptions opts_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  std::unique_ptr<Staging> staging_;
  std::map<std::tuple<const void*, DType, int64_t, int64_t>, const uint8_t*> by_host_;
  std::map<const uint8_t*, std::unique_ptr<DeviceWeight>> weights_;  // by device raw pointer
  KvMirrors<DeviceKv> kv_;
  // Replayable regions (graphs).
  std::unique_ptr<CudaGraphSet> graphs_;
  std::map<ReplayKey, StepGraph> steps_;
  int64_t next_graph_id_ = 1;
  Region region_ = Region::None;
  StepGraph* step_ = nullptr;      // the open region's
  uint64_t epoch_ = 0;             // allocate() calls so far (and arena moves)
  uint64_t region_epoch_ = 0;      // epoch_ when the open region began
  uint8_t* arena_host_ = nullptr;  // [arena_capacity_] pinned
  DeviceBuffer arena_dev_;         // [arena_capacity_]
  size_t arena_capacity_ = 0;
  cudaEvent_t arena_free_ = nullptr;  // recorded after the last arena upload
  DeviceBuffer xb_;                   // activations in BF16 for the cuBLAS path
  DeviceBuffer walk_scratch_;         // domino_walk: [chains, domino_walk_scratch_floats]
  DeviceBuffer attn_partials_;  // attention: [n, heads, max_chunks, head_dim + 2] split-K parts
  DominoSampledWalk sampled_walk_;    // domino_walk with samplers
  // The transport of exchanges enqueued since the last download: that download waits through
  // its watchdog (StreamCollective::wait), so a dead peer ends the job instead of hanging.
  StreamCollective* exchanging_ = nullptr;
  std::vector<int64_t> counts_;  // gather_columns: [ranks] floats from each rank
  std::vector<int64_t> k_off_;   // store_kv: [n] pool offsets of the K rows
  // attention: the call flattened for the device
  std::vector<int32_t> tables_;
  std::vector<QueryDesc> queries_;
  std::vector<int64_t> visible_;
};

}  // namespace ssd::cuda
