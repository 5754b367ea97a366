// CudaBackend: the Backend interface on one CUDA device (see cuda_backend.h for what runs where
// and why). Structure:
//   - Activations: allocate() is device memory, upload / copy are async on the stream, download
//     waits for the stream. The Transformer keeps its activations there, so its ops get device
//     pointers and a forward enqueues kernels without waiting until it downloads the logits.
//   - Staging (staging.h): device pointers are used in place, host pointers staged.
//   - Replayable regions (Backend::begin_replayable; Transformer forwards, TP with NCCL too):
//     per ReplayKey, the first region runs eagerly and measures the input
//     arena it needs (Measure); the next one is captured as a CUDA graph (Capture) and each one
//     after that replayed (Replay): the ops run only their host parts (KV bookkeeping, page
//     tables, inputs written into the pinned arena), then at end_replayable the deferred KV page
//     copies are enqueued, the arena uploaded in one copy, and the graph launched. A graph bakes
//     in buffer addresses, so any allocate() (a buffer regrown) makes every graph stale: it is
//     measured and captured again at its next uses (a capture always follows a measurement made
//     with the same buffers; a region whose slots still differ from its measurement throws once
//     and stays eager). Batches above invariant_max_tokens (cuBLAS) and sizes
//     outside CudaBackendOptions::graph_sizes stay eager.
//   - Weights: raw file bytes uploaded once, which embedding rows and the batch-invariant matmul
//     (decode, verification, drafting) decode in the kernel exactly as the CPU does
//     (kernels/common/dequant.h), plus a BF16 copy decoded on the device for the cuBLAS GEMMs of
//     prefill. A tensor prepared twice (tied embeddings / LM head) is uploaded once.
//   - KV: DeviceKv mirrors a KvCache's pages (same ids, same layout, all pages allocated up front:
//     max_pages x page bytes) and observes the cache (KvPageObserver) to repeat copy-on-write page
//     copies and compaction moves on the device, in stream order before the next kernel. One
//     mirror per live cache object (kv_mirrors.h: keyed by KvCache::id, freed at the first op
//     after the cache is destroyed), never one per address.
// Every op runs on the backend's one stream, so ops are ordered as the Transformer calls them.
// The current CUDA device is per host thread, and a drafter rank drafts on its compute thread,
// not the thread that built the backend: every op (and every KV page copy) first makes this
// backend's device current, so a rank on device 4 never launches on device 0.
// Compiled here against CUDA 13 (no GPU on the build machine): not yet run on a device.
#include "runtime/backend/cuda/cuda_backend.h"

#include <cublas_v2.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/kernels.cuh"
#include "runtime/backend/cuda/cuda_graphs.h"
#include "runtime/backend/cuda/domino_sampled_walk.h"
#include "runtime/backend/cuda/kv_mirrors.h"
#include "runtime/backend/cuda/staging.h"
#include "runtime/core/error.h"
#include "runtime/parallel/group_agree.h"
#include "runtime/parallel/stream_collective.h"

namespace ssd {
namespace {

using cuda::DeviceBuffer;
using cuda::is_device_pointer;
using cuda::Staging;

// Device mirror of one KvCache's pages (kept in a KvMirrors: by cache id, dropped when the cache
// dies).
class DeviceKv final : public KvPageObserver {
 public:
  DeviceKv(KvCache& cache, int device, cudaStream_t s)
      : cache_(&cache), device_(device), stream_(s), n_layers_(cache.config().n_layers),
        max_pages_(cache.max_pages()) {
    const KvCacheConfig& c = cache.config();
    geo_.row = c.n_kv_heads * c.head_dim;
    geo_.page_tokens = c.page_tokens;
    geo_.v_offset = c.page_tokens * geo_.row;
    geo_.layer_stride = 2 * geo_.v_offset;
    geo_.page_floats = c.n_layers * geo_.layer_stride;
    pool_.grow(static_cast<size_t>(cache.max_pages() * geo_.page_floats) * sizeof(float));
    geo_.pool = pool_.get<float>();
    cache.set_page_observer(this);
  }
  ~DeviceKv() override {
    if (cache_ && cache_->page_observer() == this) cache_->set_page_observer(nullptr);
  }
  DeviceKv(const DeviceKv&) = delete;
  DeviceKv& operator=(const DeviceKv&) = delete;

  void page_copied(int32_t src, int32_t dst) override {
    const size_t bytes = static_cast<size_t>(geo_.page_floats) * sizeof(float);
    enqueue_copy(page(dst), page(src), bytes);
  }
  void slot_copied(int32_t src_page, int64_t src_slot, int32_t dst_page,
                   int64_t dst_slot) override {
    const size_t bytes = static_cast<size_t>(geo_.row) * sizeof(float);
    for (int64_t l = 0; l < n_layers_; ++l) {
      for (int64_t kv = 0; kv < 2; ++kv) {
        const int64_t off = l * geo_.layer_stride + kv * geo_.v_offset;
        enqueue_copy(page(dst_page) + off + dst_slot * geo_.row,
                     page(src_page) + off + src_slot * geo_.row, bytes);
      }
    }
  }

  void cache_destroyed(const KvCache& cache) noexcept override {
    (void)cache;
    cache_ = nullptr;
    pending_.clear();  // copies between pages nobody will read again
  }
  bool dead() const { return cache_ == nullptr; }

  // Inside a captured or replayed region the copies wait (a graph must not contain them) and
  // are enqueued by flush(), before the graph: copy-on-write happens at a step's first KV write,
  // before any of the step's kernels touches the cache, so the order is the eager one.
  void set_deferred(bool on) { deferred_ = on; }
  void flush() {
    if (pending_.empty()) return;
    SSD_CUDA_CHECK(cudaSetDevice(device_));
    for (const PendingCopy& c : pending_)
      SSD_CUDA_CHECK(cudaMemcpyAsync(c.dst, c.src, c.bytes, cudaMemcpyDeviceToDevice, stream_));
    pending_.clear();
  }

  const cuda::PagedKv& geometry() const { return geo_; }
  int64_t max_pages() const { return max_pages_; }
  // Float offset of K of (layer, page, slot) in the pool.
  int64_t k_offset(int64_t layer, int32_t page_id, int64_t slot) const {
    return page_id * geo_.page_floats + layer * geo_.layer_stride + slot * geo_.row;
  }

 private:
  struct PendingCopy {
    float* dst;
    const float* src;
    size_t bytes;
  };
  float* page(int32_t p) { return pool_.get<float>() + p * geo_.page_floats; }
  void enqueue_copy(float* dst, const float* src, size_t bytes) {
    if (deferred_) {
      pending_.push_back({dst, src, bytes});
      return;
    }
    SSD_CUDA_CHECK(cudaSetDevice(device_));
    SSD_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_));
  }

  KvCache* cache_;  // null once the cache was destroyed
  int device_;
  cudaStream_t stream_;
  int64_t n_layers_, max_pages_;
  DeviceBuffer pool_;  // [max_pages, page_floats]
  cuda::PagedKv geo_;
  bool deferred_ = false;
  std::vector<PendingCopy> pending_;
};

// BackendBuffer's free function: needs no backend (a buffer may outlive it); never throws.
void free_device(void* p) noexcept { (void)cudaFree(p); }

struct DeviceWeight {
  DeviceBuffer raw;   // the file's bytes, [rows, row_bytes]
  DeviceBuffer bf16;  // [rows, cols] BF16
};

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(const CudaBackendOptions& o) : opts_(o) {
    const int count = cuda_device_count();
    SSD_CHECK(count > 0, "--backend cuda: no CUDA device is available (driver or GPU missing)");
    SSD_CHECK(o.device >= 0 && o.device < count, "CUDA device {} does not exist ({} found)",
              o.device, count);
    SSD_CUDA_CHECK(cudaSetDevice(o.device));
    SSD_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    SSD_CUBLAS_CHECK(cublasCreate(&blas_));
    SSD_CUBLAS_CHECK(cublasSetStream(blas_, stream_));
    staging_ = std::make_unique<Staging>(stream_, o.sync_each_op);
    graphs_ = std::make_unique<cuda::CudaGraphSet>(stream_);
    SSD_CUDA_CHECK(cudaEventCreateWithFlags(&arena_free_, cudaEventDisableTiming));
  }
  // For device code that runs in stream order with the ops (cuda_backend_handle).
  cudaStream_t stream() const { return stream_; }
  int device() const { return opts_.device; }
  // Replayable regions whose graph is captured and current (cuda_graphs_ready).
  int64_t graphs_ready() const {
    int64_t n = 0;
    for (const auto& [key, st] : steps_) n += st.captured && st.epoch == epoch_ ? 1 : 0;
    return n;
  }
  ~CudaBackend() override {
    if (stream_) (void)cudaStreamSynchronize(stream_);  // nothing in flight reads what we free
    kv_.clear();
    weights_.clear();
    staging_.reset();
    graphs_.reset();
    if (arena_host_) (void)cudaFreeHost(arena_host_);
    if (arena_free_) (void)cudaEventDestroy(arena_free_);
    if (blas_) (void)cublasDestroy(blas_);
    if (stream_) (void)cudaStreamDestroy(stream_);
  }

  const char* name() const override { return "cuda"; }
  int threads() const override { return 1; }

  BackendBuffer allocate(size_t bytes) override {
    SSD_CUDA_CHECK(cudaSetDevice(opts_.device));
    void* p = nullptr;
    SSD_CUDA_CHECK(cudaMalloc(&p, bytes));
    BackendBuffer buf(p, bytes, &free_device);
    ++epoch_;  // graphs captured before may read a buffer this one replaces
    SSD_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, stream_));
    return buf;
  }
  void upload(void* dst, const void* src, size_t bytes) override {
    SSD_CHECK(staging_->mode() != Staging::Mode::Record,
              "cuda backend: upload inside a replayable region");
    if (bytes == 0) return;
    SSD_CUDA_CHECK(cudaSetDevice(opts_.device));
    SSD_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_));
  }
  void download(void* dst, const void* src, size_t bytes) override {
    SSD_CHECK(staging_->mode() != Staging::Mode::Record,
              "cuda backend: download inside a replayable region");
    SSD_CUDA_CHECK(cudaSetDevice(opts_.device));
    if (bytes > 0)
      SSD_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_));
    wait_exchanges();  // a peer's failure must end the job, not hang this wait
    SSD_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }
  void wait_exchanges() override {
    if (!exchanging_) return;
    SSD_CUDA_CHECK(cudaSetDevice(opts_.device));
    StreamCollective* sc = std::exchange(exchanging_, nullptr);
    sc->wait(stream_, "a tensor-parallel forward's exchanges");
  }
  void copy(void* dst, const void* src, size_t bytes) override {
    if (bytes == 0 || dst == src || !live()) return;
    SSD_CUDA_CHECK(cudaSetDevice(opts_.device));
    SSD_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_));
  }

  Weight prepare_weight(const TensorRef& t) override {
    SSD_ASSERT(t.ne.size() == 2);
    SSD_CUDA_CHECK(cudaSetDevice(opts_.device));
    Weight w;
    w.type = t.type;
    w.rows = static_cast<int64_t>(t.ne[1]);
    w.cols = static_cast<int64_t>(t.ne[0]);
    w.row_bytes = t.row_bytes();
    const auto key = std::make_tuple(static_cast<const void*>(t.data), w.type, w.rows, w.cols);
    auto it = by_host_.find(key);
    if (it == by_host_.end()) {
      auto dw = std::make_unique<DeviceWeight>();
      const size_t raw_bytes = static_cast<size_t>(w.rows) * w.row_bytes;
      dw->raw.grow(raw_bytes);
      SSD_CUDA_CHECK(cudaMemcpyAsync(dw->raw.get(), t.data, raw_bytes, cudaMemcpyHostToDevice,
                                     stream_));
      dw->bf16.grow(static_cast<size_t>(w.rows * w.cols) * sizeof(uint16_t));
      cuda::launch_dequant_to_bf16(w.type, dw->raw.get<uint8_t>(), w.row_bytes, w.rows, w.cols,
                                   dw->bf16.get<uint16_t>(), stream_);
      SSD_CUDA_CHECK(cudaStreamSynchronize(stream_));
      const uint8_t* dev = dw->raw.get<uint8_t>();
      weights_[dev] = std::move(dw);
      it = by_host_.emplace(key, dev).first;
    }
    w.data = it->second;  // device bytes: only this backend reads them
    return w;
  }

  void matmul(const Weight& w, const float* x, float* y, int64_t n) override {
    enter();
    const DeviceWeight& dw = weight(w);
    const float* dx = staging_->in(x, static_cast<size_t>(n * w.cols));
    float* dy = staging_->out(y, static_cast<size_t>(n * w.rows));
    if (!live()) {
      SSD_ASSERT(n <= opts_.invariant_max_tokens);  // regions never reach the cuBLAS path
    } else if (n <= opts_.invariant_max_tokens) {
      // The stored bytes, decoded in the kernel (matmul.cu): decode reads Q4_1, not BF16.
      cuda::launch_matmul_invariant(w.type, dw.raw.get<uint8_t>(), w.row_bytes, dx, dy, n, w.rows,
                                    w.cols, stream_);
    } else {
      // y^T [rows, n] = W [rows, cols] x^T: column-major GEMM with W^T stored row-major.
      const size_t xb_bytes = static_cast<size_t>(n * w.cols) * sizeof(uint16_t);
      if (xb_.bytes() < xb_bytes) {  // an earlier GEMM may still read the old buffer
        SSD_CUDA_CHECK(cudaStreamSynchronize(stream_));
        xb_.grow(xb_bytes);
      }
      cuda::launch_f32_to_bf16(dx, xb_.get<uint16_t>(), n * w.cols, stream_);
      const float one = 1.0f, zero = 0.0f;
      SSD_CUBLAS_CHECK(cublasGemmEx(blas_, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(w.rows),
                                    static_cast<int>(n), static_cast<int>(w.cols), &one,
                                    dw.bf16.get(), CUDA_R_16BF, static_cast<int>(w.cols),
                                    xb_.get(), CUDA_R_16BF, static_cast<int>(w.cols), &zero, dy,
                                    CUDA_R_32F, static_cast<int>(w.rows), CUBLAS_COMPUTE_32F,
                                    CUBLAS_GEMM_DEFAULT));
    }
    staging_->finish();
  }

  void embed(const Weight& table, const int32_t* tokens, int64_t n,
             float* out) override {
    enter();
    if (!is_device_pointer(tokens))
      for (int64_t i = 0; i < n; ++i)
        SSD_CHECK(tokens[i] >= 0 && tokens[i] < table.rows,
                  "token id {} is outside the vocabulary (0..{})", tokens[i], table.rows - 1);
    weight(table);
    const int32_t* dt = staging_->in(tokens, static_cast<size_t>(n));
    float* dout = staging_->out(out, static_cast<size_t>(n * table.cols));
    if (live())
      cuda::launch_embed(table.type, table.data, table.row_bytes, table.cols, dt, n, dout,
                         stream_);
    staging_->finish();
  }

  void rmsnorm(const float* x, const float* g, float* y, int64_t rows, int64_t dim,
               float eps) override {
    enter();
    SSD_CHECK(dim > 0, "rmsnorm: dim must be positive, got {}", dim);
    const size_t count = static_cast<size_t>(rows * dim);
    float* dy = staging_->out(y, count);  // first: an in-place call maps x onto the same buffer
    const float* dx = staging_->in(x, count);
    if (x == y && !is_device_pointer(x))  // the in-place buffer must hold x's values
      SSD_CUDA_CHECK(cudaMemcpyAsync(dy, x, count * sizeof(float), cudaMemcpyHostToDevice,
                                     stream_));
    const float* dg = staging_->in(g, static_cast<size_t>(dim));
    if (live()) cuda::launch_rmsnorm(dx, dg, dy, rows, dim, eps, stream_);
    staging_->finish();
  }

  void rope(float* x, int64_t n, int64_t n_heads, int64_t head_dim, int64_t rot_dim,
            const int32_t* positions, const float* inv_freq, RopeLayout layout) override {
    enter();
    SSD_CHECK(rot_dim % 2 == 0 && rot_dim >= 0 && rot_dim <= head_dim,
              "rope: rot_dim {} must be even and at most head_dim {}", rot_dim, head_dim);
    float* dx = staging_->inout(x, static_cast<size_t>(n * n_heads * head_dim));
    const int32_t* dp = staging_->in(positions, static_cast<size_t>(n));
    const float* df = staging_->in(inv_freq, static_cast<size_t>(rot_dim / 2));
    if (live())
      cuda::launch_rope(dx, n, n_heads, head_dim, rot_dim, dp, df,
                        layout == RopeLayout::NeoX, stream_);
    staging_->finish();
  }

  void store_kv(KvCache& cache, int64_t layer, const SeqId* seqs, const int64_t* cache_pos,
                const float* k, const float* v, int64_t n) override {
    enter();
    DeviceKv& dkv = mirror(cache);
    const int64_t row = cache.config().n_kv_heads * cache.config().head_dim;
    k_off_.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      cache.key_mut(layer, seqs[i], cache_pos[i]);  // copy on write: the observer copies pages
      const KvCache::SeqView sv = cache.view(seqs[i]);
      const int64_t pt = cache.config().page_tokens;
      k_off_[i] = dkv.k_offset(layer, sv.pages[cache_pos[i] / pt], cache_pos[i] % pt);
    }
    const int64_t* doff = staging_->in(k_off_.data(), k_off_.size());
    const float* dk = staging_->in(k, static_cast<size_t>(n * row));
    const float* dv = staging_->in(v, static_cast<size_t>(n * row));
    if (live())
      cuda::launch_store_kv(const_cast<float*>(dkv.geometry().pool), doff,
                            dkv.geometry().v_offset, dk, dv, n, row, stream_);
    staging_->finish();
  }

  void attention(const AttentionCall& c) override;

  // Tensor-parallel exchanges (Backend::allreduce_sum / gather_columns). When the group's
  // transport moves this device's memory itself (a StreamCollective on this device: NCCL),
  // the bytes are gathered into `scratch` on this stream and finished by a kernel
  // (exchange.cu), with no host round trip, and the ops are recorded in replayable regions like
  // any other (the group agrees on replaying: begin_replayable). Otherwise the defaults' host
  // round trip (download, Collective, upload), which a region may not contain.
  bool exchanges_replayable(Collective& comm) override { return device_exchange(comm) != nullptr; }
  void allreduce_sum(Collective& comm, float* y, int64_t count, float* scratch) override;
  void gather_columns(Collective& comm, const float* local, int64_t rows,
                      const std::vector<int64_t>& off, float* out, float* scratch) override;

  bool has_domino_walk() const override { return true; }
  void domino_walk(const DominoWalkCall& c) override;

  void begin_replayable(const ReplayKey& key) override;
  void end_replayable() override;
  void abort_replayable() noexcept override;

  void swiglu(const float* gate, const float* up, float* out, int64_t count) override {
    enter();
    float* dout = staging_->out(out, static_cast<size_t>(count));
    const float* dg = gate == out ? dout : staging_->in(gate, static_cast<size_t>(count));
    const float* du = up == out ? dout : staging_->in(up, static_cast<size_t>(count));
    if (!is_device_pointer(out) && (gate == out || up == out))
      SSD_CUDA_CHECK(cudaMemcpyAsync(dout, out, count * sizeof(float), cudaMemcpyHostToDevice,
                                     stream_));
    if (live()) cuda::launch_swiglu(dg, du, dout, count, stream_);
    staging_->finish();
  }

  void add(float* y, const float* x, int64_t count) override {
    enter();
    float* dy = staging_->inout(y, static_cast<size_t>(count));
    const float* dx = staging_->in(x, static_cast<size_t>(count));
    if (live()) cuda::launch_add(dy, dx, count, stream_);
    staging_->finish();
  }

  void add_bias(float* y, const float* b, int64_t rows, int64_t cols) override {
    enter();
    float* dy = staging_->inout(y, static_cast<size_t>(rows * cols));
    const float* db = staging_->in(b, static_cast<size_t>(cols));
    if (live()) cuda::launch_add_bias(dy, db, rows, cols, stream_);
    staging_->finish();
  }

 private:
  enum class Region { None, Eager, Measure, Capture, Replay };
  // What the graph of one ReplayKey needs (see the top of the file).
  struct StepGraph {
    int64_t id = 0;          // its CudaGraphSet size key
    size_t arena_bytes = 0;  // measured; 0 = not yet
    uint64_t measured_epoch = 0;  // allocation epoch of the measuring run
    bool captured = false;
    uint64_t epoch = 0;  // allocation epoch it was captured in
    bool eager_only = false;  // its capture or replay failed once: never graphed again
  };
  // The group's stream interface when it can exchange this device's memory, else null.
  StreamCollective* device_exchange(Collective& comm) const {
    StreamCollective* sc = stream_collective(comm);
    return sc && sc->device() == opts_.device ? sc : nullptr;
  }
  // False while a region replays: ops run their host part only (the graph has the kernels).
  bool live() const { return region_ != Region::Replay; }
  bool graph_size_allowed(int64_t n) const {
    if (!opts_.graphs || n > opts_.invariant_max_tokens) return false;
    return opts_.graph_sizes.empty() ||
           std::find(opts_.graph_sizes.begin(), opts_.graph_sizes.end(), n) !=
               opts_.graph_sizes.end();
  }
  void set_kv_deferred(bool on) {
    kv_.for_each([on](DeviceKv& m) { m.set_deferred(on); });
  }
  void flush_kv() {
    kv_.for_each([](DeviceKv& m) { m.flush(); });
  }
  void leave_region() noexcept {
    region_ = Region::None;
    step_ = nullptr;
    staging_->set_mode(Staging::Mode::Eager);
    set_kv_deferred(false);
  }

  // First call of every op: this backend's device current on the calling thread, no staged
  // pointers left from a previous op.
  // Outside regions, it also frees the mirrors of KV caches destroyed since the last op.
  void enter() {
    SSD_CUDA_CHECK(cudaSetDevice(opts_.device));
    staging_->begin();
    if (region_ == Region::None && kv_.has_dead()) {
      SSD_CUDA_CHECK(cudaStreamSynchronize(stream_));  // queued kernels may read those pools
      kv_.prune();
      ++epoch_;  // a graph keyed by a dead cache's address must not replay on a new one's
    }
  }
  const DeviceWeight& weight(const Weight& w) const {
    auto it = weights_.find(w.data);
    SSD_CHECK(it != weights_.end(),
              "cuda backend: a weight matrix ({} x {}) that this backend did not prepare", w.rows,
              w.cols);
    return *it->second;
  }
  DeviceKv& mirror(KvCache& cache) {
    bool created = false;
    DeviceKv& m = kv_.get(cache, &created, opts_.device, stream_);
    if (created) ++epoch_;  // new pool addresses (see enter())
    return m;
  }

  CudaBackendOptions opts_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  std::unique_ptr<Staging> staging_;
  std::map<std::tuple<const void*, DType, int64_t, int64_t>, const uint8_t*> by_host_;
  std::map<const uint8_t*, std::unique_ptr<DeviceWeight>> weights_;  // by device raw pointer
  cuda::KvMirrors<DeviceKv> kv_;
  // Replayable regions (graphs).
  std::unique_ptr<cuda::CudaGraphSet> graphs_;
  std::map<ReplayKey, StepGraph> steps_;
  int64_t next_graph_id_ = 1;
  Region region_ = Region::None;
  StepGraph* step_ = nullptr;       // the open region's
  uint64_t epoch_ = 0;              // allocate() calls so far (and arena moves)
  uint64_t region_epoch_ = 0;       // epoch_ when the open region began
  uint8_t* arena_host_ = nullptr;   // [arena_capacity_] pinned
  DeviceBuffer arena_dev_;          // [arena_capacity_]
  size_t arena_capacity_ = 0;
  cudaEvent_t arena_free_ = nullptr;  // recorded after the last arena upload
  DeviceBuffer xb_;              // activations in BF16 for the cuBLAS path
  DeviceBuffer walk_scratch_;    // domino_walk: [chains, domino_walk_scratch_floats]
  cuda::DominoSampledWalk sampled_walk_;  // domino_walk with samplers
  // The transport of exchanges enqueued since the last download: that download waits through
  // its watchdog (StreamCollective::wait), so a dead peer ends the job instead of hanging.
  StreamCollective* exchanging_ = nullptr;
  std::vector<int64_t> counts_;  // gather_columns: [ranks] floats from each rank
  std::vector<int64_t> k_off_;   // store_kv: [n] pool offsets of the K rows
  // attention: the call flattened for the device
  std::vector<int32_t> tables_;
  std::vector<cuda::QueryDesc> queries_;
  std::vector<int64_t> visible_;
};

void CudaBackend::attention(const AttentionCall& c) {
  enter();
  SSD_CHECK(c.n >= 0 && c.n_heads > 0 && c.n_kv_heads > 0 && c.head_dim > 0,
            "attention: bad shape n={} heads={} kv_heads={} head_dim={}", c.n, c.n_heads,
            c.n_kv_heads, c.head_dim);
  SSD_CHECK(c.head_dim <= cuda::kMaxHeadDim, "cuda attention: head_dim {} exceeds {}",
            c.head_dim, cuda::kMaxHeadDim);
  const KvCacheConfig& cc = c.cache->config();
  SSD_CHECK(c.n_kv_heads == cc.n_kv_heads && c.head_dim == cc.head_dim,
            "attention: call has {} KV heads x {} but the cache holds {} x {}", c.n_kv_heads,
            c.head_dim, cc.n_kv_heads, cc.head_dim);
  SSD_CHECK(c.kv_head_of || c.n_heads % c.n_kv_heads == 0,
            "attention: {} query heads do not group evenly over {} KV heads (give kv_head_of)",
            c.n_heads, c.n_kv_heads);
  const DeviceKv* dkv = kv_.find(*c.cache);
  SSD_CHECK(dkv, "cuda attention: the KV cache was never written on this backend");
  // Flatten: each distinct sequence's page table once, each query's prefix and visible range.
  tables_.clear();
  queries_.assign(static_cast<size_t>(c.n), cuda::QueryDesc{});
  std::map<SeqId, int64_t> table_of;
  for (int64_t i = 0; i < c.n; ++i) {
    auto [t, fresh] = table_of.emplace(c.seqs[i], static_cast<int64_t>(tables_.size()));
    if (fresh) {
      const KvCache::SeqView sv = c.cache->view(c.seqs[i]);
      const int64_t pages = (sv.length + cc.page_tokens - 1) / cc.page_tokens;
      tables_.insert(tables_.end(), sv.pages, sv.pages + pages);
    }
    cuda::QueryDesc& q = queries_[i];
    q.page_table = t->second;
    q.prefix = c.prefix_len[i];
    q.visible = c.visible_offsets[i];
    q.n_visible = c.visible_offsets[i + 1] - c.visible_offsets[i];
  }
  const int64_t n_vis = c.n > 0 ? c.visible_offsets[c.n] : 0;
  const size_t qf = static_cast<size_t>(c.n * c.n_heads * c.head_dim);
  const float* dq = staging_->in(c.q, qf);
  float* dout = staging_->out(c.out, qf);
  // Region slots sized by the key, not the contents: at most n page tables of at most max_pages
  // pages, at most n visible positions per query.
  const int32_t* dtab = staging_->in(tables_.data(), tables_.size(),
                                     static_cast<size_t>(c.n * dkv->max_pages()));
  const cuda::QueryDesc* dqd = staging_->in(queries_.data(), queries_.size());
  const int64_t* dvis = staging_->in(c.visible, static_cast<size_t>(n_vis),
                                     static_cast<size_t>(c.n * c.n));
  const int32_t* dhead = staging_->in(c.kv_head_of, c.kv_head_of ? c.n_heads : 0);
  if (live())
    cuda::launch_attention(dq, dout, c.n, c.n_heads, c.n_kv_heads, c.head_dim, dhead, c.layer,
                           c.scale, dkv->geometry(), dtab, dqd, dvis, stream_);
  staging_->finish();
}

// The fused Domino walk (kernels/cuda/domino_walk.cu): the block's logits and hidden rows are
// already in device memory (the backbone left them there); the small host inputs are staged and
// the tokens come back with the one wait of the call.
void CudaBackend::domino_walk(const DominoWalkCall& c) {
  enter();
  SSD_CHECK(region_ == Region::None, "cuda backend: a Domino walk inside a replayable region");
  SSD_CHECK(c.chains >= 0 && c.d > 0 && c.g > 0 && c.r > 0 && c.vd > 0,
            "domino walk: bad shape chains={} d={} g={} r={} Vd={}", c.chains, c.d, c.g, c.r,
            c.vd);
  const auto check_shape = [](const Weight* w, int64_t rows, int64_t cols,
                              const char* what) {
    SSD_CHECK(w && w->rows == rows && w->cols == cols,
              "domino walk: {} must be [{}, {}], got [{}, {}]", what, rows, cols,
              w ? w->rows : 0, w ? w->cols : 0);
  };
  check_shape(c.w_ih, 3 * c.g, c.d, "W_ih");
  check_shape(c.w_hh, 3 * c.g, c.g, "W_hh");
  check_shape(c.w1, c.r, c.d + c.g, "W1");
  check_shape(c.w2, c.vd, c.r, "W2");
  SSD_CHECK(c.token_embd && c.token_embd->cols == c.d,
            "domino walk: the token embedding must have {} columns", c.d);
  if (c.chains == 0 || c.first[c.chains] == 0) return;
  SSD_CHECK(is_device_pointer(c.logits) && is_device_pointer(c.hidden),
            "domino walk: logits and hidden rows must be this backend's memory");
  for (int64_t i = 0; i < c.chains; ++i) {
    SSD_CHECK(c.first[i + 1] >= c.first[i], "domino walk: chain {} has negative length", i);
    SSD_CHECK(c.anchors[i] >= 0 && c.anchors[i] < c.token_embd->rows,
              "token id {} is outside the vocabulary (0..{})", c.anchors[i],
              c.token_embd->rows - 1);
  }
  SSD_CHECK(c.first[0] == 0, "domino walk: the first chain must start at row 0");
  const int64_t rows = c.first[c.chains];
  const size_t scratch_bytes =
      static_cast<size_t>(c.chains * cuda::domino_walk_scratch_floats(c.d, c.g, c.r)) *
      sizeof(float);
  if (walk_scratch_.bytes() < scratch_bytes) {  // an earlier walk may still use the old one
    SSD_CUDA_CHECK(cudaStreamSynchronize(stream_));
    walk_scratch_.grow(scratch_bytes);
  }
  weight(*c.token_embd);  // prepared here: its data are this backend's device bytes
  cuda::DominoWalkArgs a;
  a.embd = c.token_embd->data;
  a.embd_type = c.token_embd->type;
  a.embd_row_bytes = c.token_embd->row_bytes;
  a.w_ih = weight(*c.w_ih).bf16.get<uint16_t>();
  a.w_hh = weight(*c.w_hh).bf16.get<uint16_t>();
  a.w1 = weight(*c.w1).bf16.get<uint16_t>();
  a.w2 = weight(*c.w2).bf16.get<uint16_t>();
  a.b_ih = staging_->in(c.b_ih, static_cast<size_t>(3 * c.g));
  a.b_hh = staging_->in(c.b_hh, static_cast<size_t>(3 * c.g));
  a.vocab_ids = c.vocab_ids ? staging_->in(c.vocab_ids, static_cast<size_t>(c.vd)) : nullptr;
  a.d = c.d;
  a.g = c.g;
  a.r = c.r;
  a.vd = c.vd;
  a.use_head = c.use_head;
  a.logits = c.logits;
  a.hidden = c.hidden;
  a.first = staging_->in(c.first, static_cast<size_t>(c.chains + 1));
  a.anchors = staging_->in(c.anchors, static_cast<size_t>(c.chains));
  a.chains = c.chains;
  a.scratch = walk_scratch_.get<float>();
  if (c.samplers) {  // one launch per position, the sampler's kernels between (see its header)
    SSD_CHECK(c.lists, "domino walk: a sampled walk needs its lists' output");
    SSD_CHECK(!c.vocab_ids || c.vocab_ids_host,
              "domino walk: a sampled walk needs the draft vocabulary's ids on the host");
    sampled_walk_.run(a, c, stream_);
    staging_->finish();
    return;
  }
  a.tokens = staging_->out(c.tokens, static_cast<size_t>(rows));
  cuda::launch_domino_walk(a, stream_);
  staging_->finish();  // the tokens are on the host when this returns
}

void CudaBackend::allreduce_sum(Collective& comm, float* y, int64_t count, float* scratch) {
  StreamCollective* sc = device_exchange(comm);
  if (!sc) {
    SSD_CHECK(region_ == Region::None || region_ == Region::Eager,
              "cuda backend: a host exchange inside a replayable region");
    Backend::allreduce_sum(comm, y, count, scratch);
    return;
  }
  enter();
  SSD_CHECK(is_device_pointer(y) && is_device_pointer(scratch),
            "cuda backend: allreduce_sum takes device memory");
  if (live() && count > 0) {
    if (sc->rank_order_sums()) {  // collective.h's order: gather, then add rank after rank
      sc->allgather(y, scratch, count, stream_);
      cuda::launch_rank_order_sum(scratch, comm.size(), count, y, stream_);
    } else {
      sc->allreduce(y, count, stream_);
    }
  }
  exchanging_ = sc;  // also when a replay's graph holds the exchange
  staging_->finish();
}

void CudaBackend::gather_columns(Collective& comm, const float* local, int64_t rows,
                                 const std::vector<int64_t>& off, float* out, float* scratch) {
  StreamCollective* sc = device_exchange(comm);
  if (!sc) {
    SSD_CHECK(region_ == Region::None || region_ == Region::Eager,
              "cuda backend: a host exchange inside a replayable region");
    Backend::gather_columns(comm, local, rows, off, out, scratch);
    return;
  }
  enter();
  const int ranks = comm.size();
  SSD_ASSERT(static_cast<int>(off.size()) == ranks + 1);
  SSD_CHECK(is_device_pointer(local) && is_device_pointer(out) && is_device_pointer(scratch),
            "cuda backend: gather_columns takes device memory");
  counts_.resize(static_cast<size_t>(ranks));
  for (int r = 0; r < ranks; ++r) counts_[r] = rows * (off[r + 1] - off[r]);
  const int64_t* doff = staging_->in(off.data(), off.size());  // [ranks + 1]
  if (live() && rows * off.back() > 0) {
    sc->allgatherv(local, counts_.data(), scratch, stream_);  // rank-major blocks
    cuda::launch_stitch_columns(scratch, doff, ranks, rows, off.back(), out, stream_);
  }
  exchanging_ = sc;
  staging_->finish();
}

void CudaBackend::begin_replayable(const ReplayKey& key) {
  SSD_CHECK(region_ == Region::None, "cuda backend: replayable regions do not nest");
  enter();
  StepGraph* found = nullptr;
  Region want = Region::Eager;
  if (graph_size_allowed(key.n)) {
    auto [it, fresh] = steps_.try_emplace(key);
    if (fresh) it->second.id = next_graph_id_++;
    found = &it->second;
    if (found->eager_only)
      want = Region::Eager;
    else if (found->captured && found->epoch == epoch_)
      want = Region::Replay;
    else if (found->arena_bytes == 0 || found->measured_epoch != epoch_)
      // Never measured, or buffers moved since: run eagerly once more, measuring, and capture
      // the next time, so a capture always follows a measurement of the same buffers.
      want = Region::Measure;
    else
      want = Region::Capture;
  }
  // A forward with collectives inside: NCCL needs a captured collective to be captured on every
  // rank of the group (and a replayed one replayed), so the group runs in the least advanced
  // state any of its ranks is in (Eager < Measure < Capture < Replay). A rank held back
  // measures again or captures again, which its state allows; the group converges in two
  // forwards.
  if (key.group) want = static_cast<Region>(agree_min(*key.group, static_cast<int>(want)));
  if (want == Region::Eager) {
    region_ = Region::Eager;
    return;
  }
  StepGraph& st = *found;
  step_ = &st;
  region_ = want;
  if (want == Region::Measure) {
    staging_->set_mode(Staging::Mode::Measure);
    return;
  }
  try {
    if (arena_capacity_ < st.arena_bytes) {  // new addresses: every graph so far is stale
      SSD_CUDA_CHECK(cudaStreamSynchronize(stream_));
      if (arena_host_) SSD_CUDA_CHECK(cudaFreeHost(arena_host_));
      arena_host_ = nullptr;
      arena_capacity_ = 0;
      const size_t cap = std::max<size_t>(st.arena_bytes, size_t{1} << 20);
      SSD_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&arena_host_), cap));
      arena_dev_ = DeviceBuffer(cap);
      arena_capacity_ = cap;
      ++epoch_;
    }
    // The previous region's arena upload must have read the pinned bytes before they change.
    SSD_CUDA_CHECK(cudaEventSynchronize(arena_free_));
    staging_->set_mode(Staging::Mode::Record,
                       cuda::ArenaView{arena_host_, arena_dev_.get<uint8_t>(), arena_capacity_});
    set_kv_deferred(true);
    region_epoch_ = epoch_;
    if (region_ == Region::Capture) graphs_->begin_capture();
  } catch (...) {
    leave_region();
    throw;
  }
}

void CudaBackend::end_replayable() {
  SSD_CHECK(region_ != Region::None, "cuda backend: end_replayable without begin_replayable");
  if (region_ == Region::Eager) {
    leave_region();
    return;
  }
  StepGraph& st = *step_;
  const size_t used = std::max(staging_->arena_used(), Staging::kSlotAlign);
  if (region_ == Region::Measure) {
    st.arena_bytes = used;
    st.measured_epoch = epoch_;
    leave_region();
    return;
  }
  try {
    if (region_ == Region::Capture) {
      region_ = Region::Replay;  // no longer capturing, whatever end_capture does
      graphs_->end_capture(st.id);
      // An allocation inside the region moved a buffer: the graph is right for this run only.
      st.captured = epoch_ == region_epoch_;
      st.epoch = region_epoch_;
    }
    SSD_CHECK(used == st.arena_bytes,
              "cuda backend: a replayable region used {} arena bytes, its recording {}", used,
              st.arena_bytes);
    set_kv_deferred(false);
    flush_kv();
    SSD_CUDA_CHECK(cudaMemcpyAsync(arena_dev_.get(), arena_host_, used, cudaMemcpyHostToDevice,
                                   stream_));
    SSD_CUDA_CHECK(cudaEventRecord(arena_free_, stream_));
    graphs_->replay(st.id);
    if (opts_.sync_each_op) SSD_CUDA_CHECK(cudaStreamSynchronize(stream_));
  } catch (...) {
    // This forward's kernels did not run (the error reaches the caller); the key stays eager
    // from now on, so a retry runs without graphs.
    st.captured = false;
    st.eager_only = true;
    try {
      set_kv_deferred(false);
      flush_kv();  // the host cache did its copy-on-write: the mirror must follow
    } catch (...) {  // the first error is the one reported
    }
    leave_region();
    throw;
  }
  leave_region();
}

void CudaBackend::abort_replayable() noexcept {
  if (region_ == Region::Capture) {
    graphs_->abort_capture();
    step_->captured = false;
  }
  try {
    set_kv_deferred(false);
    flush_kv();
  } catch (...) {  // the error that aborted the region is the one reported
  }
  leave_region();
}

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(const CudaBackendOptions& opts) {
  return std::make_unique<CudaBackend>(opts);
}

CudaBackendHandle cuda_backend_handle(Backend& be) {
  auto* cb = dynamic_cast<CudaBackend*>(&be);
  SSD_CHECK(cb, "the {} backend is not a CUDA backend", be.name());
  return CudaBackendHandle{cb->stream(), cb->device()};
}

int64_t cuda_graphs_ready(Backend& be) {
  auto* cb = dynamic_cast<CudaBackend*>(&be);
  return cb ? cb->graphs_ready() : 0;
}

}  // namespace ssd
