// CudaBackend: the Backend interface on one CUDA device (see cuda_backend.h for what runs where
// and why). Structure:
//   - Activations: allocate() is device memory, upload / copy are async on the stream, download
//     waits for the stream. The Transformer keeps its activations there, so its ops get device
//     pointers and a forward enqueues kernels without waiting until it downloads the logits.
//   - Staging: every float / int pointer an op receives is looked up with
//     cudaPointerGetAttributes; device (or managed) pointers are used in place, host pointers are
//     copied to per-op device scratch (inputs before, outputs after). An op waits for the stream
//     only when it has a host output to copy back (or with sync_each_op). The same host pointer
//     given twice in one op (rmsnorm in place) maps to one device buffer. Reusing a staging buffer
//     for the next op is safe without a wait: its upload is in stream order after the kernel that
//     read it, and cudaMemcpyAsync from pageable host memory has taken the bytes when it returns.
//   - Weights: raw file bytes uploaded once (embedding rows decode them exactly as the CPU does,
//     kernels/common/dequant.h) plus a BF16 copy decoded on the device for the GEMMs. A tensor
//     prepared twice (tied embeddings / LM head) is uploaded once.
//   - KV: DeviceKv mirrors a KvCache's pages (same ids, same layout, all pages allocated up front:
//     max_pages x page bytes) and observes the cache (KvPageObserver) to repeat copy-on-write page
//     copies and compaction moves on the device, in stream order before the next kernel.
// Every op runs on the backend's one stream, so ops are ordered as the Transformer calls them.
// The current CUDA device is per host thread, and a drafter rank drafts on its compute thread,
// not the thread that built the backend: every op (and every KV page copy) first makes this
// backend's device current, so a rank on device 4 never launches on device 0.
// Compiled here against CUDA 13 (no GPU on the build machine): not yet run on a device.
#include "kernels/cuda/cuda_backend.h"

#include <cublas_v2.h>

#include <cstring>
#include <map>
#include <memory>
#include <vector>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/kernels.cuh"
#include "runtime/core/error.h"

namespace ssd {
namespace {

using cuda::DeviceBuffer;
using cuda::is_device_pointer;

// Per-op mapping of host pointers to device scratch (see the top of the file).
class Staging {
 public:
  Staging(cudaStream_t s, bool sync_each_op) : stream_(s), sync_each_op_(sync_each_op) {}

  // Device view of `bytes` at p: copied in when `in`, copied back at finish() when `out`.
  template <class T>
  T* map(const T* p, size_t count, bool in, bool out) {
    const size_t bytes = count * sizeof(T);
    if (p == nullptr || bytes == 0) return const_cast<T*>(p);
    if (is_device_pointer(p)) return const_cast<T*>(p);
    for (Entry& e : entries_) {
      if (e.host == p) {
        SSD_ASSERT(bytes <= e.bytes);
        e.out = e.out || out;
        return static_cast<T*>(e.dev);
      }
    }
    if (used_ == buffers_.size()) buffers_.emplace_back();
    DeviceBuffer& b = buffers_[used_++];
    if (b.bytes() < bytes) {  // an earlier op's kernel may still read the old buffer
      SSD_CUDA_CHECK(cudaStreamSynchronize(stream_));
      b.grow(bytes);
    }
    if (in) SSD_CUDA_CHECK(cudaMemcpyAsync(b.get(), p, bytes, cudaMemcpyHostToDevice, stream_));
    entries_.push_back({const_cast<T*>(p), b.get(), bytes, out});
    return b.get<T>();
  }
  template <class T>
  const T* in(const T* p, size_t count) {
    return map(p, count, true, false);
  }
  template <class T>
  T* out(T* p, size_t count) {
    return map(static_cast<const T*>(p), count, false, true);
  }
  template <class T>
  T* inout(T* p, size_t count) {
    return map(static_cast<const T*>(p), count, true, true);
  }

  // Forgets the previous op's mappings (called first by every op, so an op that threw halfway
  // leaves nothing behind).
  void begin() {
    entries_.clear();
    used_ = 0;
  }

  // Copies host outputs back and waits for them; an op on device memory only returns at once
  // (its errors surface at the next wait: a download, or every op with sync_each_op).
  void finish() {
    bool wait = sync_each_op_;
    for (const Entry& e : entries_) {
      if (!e.out) continue;
      SSD_CUDA_CHECK(cudaMemcpyAsync(e.host, e.dev, e.bytes, cudaMemcpyDeviceToHost, stream_));
      wait = true;
    }
    if (wait) SSD_CUDA_CHECK(cudaStreamSynchronize(stream_));
    entries_.clear();
    used_ = 0;
  }

 private:
  struct Entry {
    void* host;
    void* dev;
    size_t bytes;
    bool out;
  };
  cudaStream_t stream_;
  bool sync_each_op_;
  std::vector<DeviceBuffer> buffers_;  // grown, reused across ops
  size_t used_ = 0;
  std::vector<Entry> entries_;
};

// Device mirror of one KvCache's pages.
class DeviceKv final : public KvPageObserver {
 public:
  DeviceKv(KvCache& cache, int device, cudaStream_t s)
      : cache_(cache), device_(device), stream_(s) {
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
    if (cache_.page_observer() == this) cache_.set_page_observer(nullptr);
  }
  DeviceKv(const DeviceKv&) = delete;
  DeviceKv& operator=(const DeviceKv&) = delete;

  void page_copied(int32_t src, int32_t dst) override {
    SSD_CUDA_CHECK(cudaSetDevice(device_));
    const size_t bytes = static_cast<size_t>(geo_.page_floats) * sizeof(float);
    SSD_CUDA_CHECK(cudaMemcpyAsync(page(dst), page(src), bytes, cudaMemcpyDeviceToDevice,
                                   stream_));
  }
  void slot_copied(int32_t src_page, int64_t src_slot, int32_t dst_page,
                   int64_t dst_slot) override {
    SSD_CUDA_CHECK(cudaSetDevice(device_));
    const size_t bytes = static_cast<size_t>(geo_.row) * sizeof(float);
    for (int64_t l = 0; l < cache_.config().n_layers; ++l) {
      for (int64_t kv = 0; kv < 2; ++kv) {
        const int64_t off = l * geo_.layer_stride + kv * geo_.v_offset;
        SSD_CUDA_CHECK(cudaMemcpyAsync(page(dst_page) + off + dst_slot * geo_.row,
                                       page(src_page) + off + src_slot * geo_.row, bytes,
                                       cudaMemcpyDeviceToDevice, stream_));
      }
    }
  }

  const cuda::PagedKv& geometry() const { return geo_; }
  // Float offset of K of (layer, page, slot) in the pool.
  int64_t k_offset(int64_t layer, int32_t page_id, int64_t slot) const {
    return page_id * geo_.page_floats + layer * geo_.layer_stride + slot * geo_.row;
  }

 private:
  float* page(int32_t p) { return pool_.get<float>() + p * geo_.page_floats; }

  KvCache& cache_;
  int device_;
  cudaStream_t stream_;
  DeviceBuffer pool_;  // [max_pages, page_floats]
  cuda::PagedKv geo_;
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
  }
  ~CudaBackend() override {
    if (stream_) (void)cudaStreamSynchronize(stream_);  // nothing in flight reads what we free
    kv_.clear();
    weights_.clear();
    staging_.reset();
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
    SSD_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, stream_));
    return buf;
  }
  void upload(void* dst, const void* src, size_t bytes) override {
    if (bytes == 0) return;
    SSD_CUDA_CHECK(cudaSetDevice(opts_.device));
    SSD_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_));
  }
  void download(void* dst, const void* src, size_t bytes) override {
    SSD_CUDA_CHECK(cudaSetDevice(opts_.device));
    if (bytes > 0)
      SSD_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_));
    SSD_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }
  void copy(void* dst, const void* src, size_t bytes) override {
    if (bytes == 0 || dst == src) return;
    SSD_CUDA_CHECK(cudaSetDevice(opts_.device));
    SSD_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_));
  }

  kernels::WeightMatrix prepare_weight(const TensorRef& t) override {
    SSD_ASSERT(t.ne.size() == 2);
    SSD_CUDA_CHECK(cudaSetDevice(opts_.device));
    kernels::WeightMatrix w;
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

  void matmul(const kernels::WeightMatrix& w, const float* x, float* y, int64_t n) override {
    enter();
    const DeviceWeight& dw = weight(w);
    const float* dx = staging_->in(x, static_cast<size_t>(n * w.cols));
    float* dy = staging_->out(y, static_cast<size_t>(n * w.rows));
    if (n <= opts_.invariant_max_tokens) {
      cuda::launch_matmul_invariant(dw.bf16.get<uint16_t>(), dx, dy, n, w.rows, w.cols, stream_);
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

  void embed(const kernels::WeightMatrix& table, const int32_t* tokens, int64_t n,
             float* out) override {
    enter();
    if (!is_device_pointer(tokens))
      for (int64_t i = 0; i < n; ++i)
        SSD_CHECK(tokens[i] >= 0 && tokens[i] < table.rows,
                  "token id {} is outside the vocabulary (0..{})", tokens[i], table.rows - 1);
    weight(table);
    const int32_t* dt = staging_->in(tokens, static_cast<size_t>(n));
    float* dout = staging_->out(out, static_cast<size_t>(n * table.cols));
    cuda::launch_embed(table.type, table.data, table.row_bytes, table.cols, dt, n, dout, stream_);
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
    cuda::launch_rmsnorm(dx, dg, dy, rows, dim, eps, stream_);
    staging_->finish();
  }

  void rope(float* x, int64_t n, int64_t n_heads, int64_t head_dim, int64_t rot_dim,
            const int32_t* positions, const float* inv_freq, kernels::RopeLayout layout) override {
    enter();
    SSD_CHECK(rot_dim % 2 == 0 && rot_dim >= 0 && rot_dim <= head_dim,
              "rope: rot_dim {} must be even and at most head_dim {}", rot_dim, head_dim);
    float* dx = staging_->inout(x, static_cast<size_t>(n * n_heads * head_dim));
    const int32_t* dp = staging_->in(positions, static_cast<size_t>(n));
    const float* df = staging_->in(inv_freq, static_cast<size_t>(rot_dim / 2));
    cuda::launch_rope(dx, n, n_heads, head_dim, rot_dim, dp, df,
                      layout == kernels::RopeLayout::NeoX, stream_);
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
    cuda::launch_store_kv(const_cast<float*>(dkv.geometry().pool), doff,
                          dkv.geometry().v_offset, dk, dv, n, row, stream_);
    staging_->finish();
  }

  void attention(const AttentionCall& c) override;

  void swiglu(const float* gate, const float* up, float* out, int64_t count) override {
    enter();
    float* dout = staging_->out(out, static_cast<size_t>(count));
    const float* dg = gate == out ? dout : staging_->in(gate, static_cast<size_t>(count));
    const float* du = up == out ? dout : staging_->in(up, static_cast<size_t>(count));
    if (!is_device_pointer(out) && (gate == out || up == out))
      SSD_CUDA_CHECK(cudaMemcpyAsync(dout, out, count * sizeof(float), cudaMemcpyHostToDevice,
                                     stream_));
    cuda::launch_swiglu(dg, du, dout, count, stream_);
    staging_->finish();
  }

  void add(float* y, const float* x, int64_t count) override {
    enter();
    float* dy = staging_->inout(y, static_cast<size_t>(count));
    const float* dx = staging_->in(x, static_cast<size_t>(count));
    cuda::launch_add(dy, dx, count, stream_);
    staging_->finish();
  }

  void add_bias(float* y, const float* b, int64_t rows, int64_t cols) override {
    enter();
    float* dy = staging_->inout(y, static_cast<size_t>(rows * cols));
    const float* db = staging_->in(b, static_cast<size_t>(cols));
    cuda::launch_add_bias(dy, db, rows, cols, stream_);
    staging_->finish();
  }

 private:
  // First call of every op: this backend's device current on the calling thread, no staged
  // pointers left from a previous op.
  void enter() {
    SSD_CUDA_CHECK(cudaSetDevice(opts_.device));
    staging_->begin();
  }
  const DeviceWeight& weight(const kernels::WeightMatrix& w) const {
    auto it = weights_.find(w.data);
    SSD_CHECK(it != weights_.end(),
              "cuda backend: a weight matrix ({} x {}) that this backend did not prepare", w.rows,
              w.cols);
    return *it->second;
  }
  DeviceKv& mirror(KvCache& cache) {
    auto it = kv_.find(&cache);
    if (it == kv_.end())
      it = kv_.emplace(&cache, std::make_unique<DeviceKv>(cache, opts_.device, stream_)).first;
    return *it->second;
  }

  CudaBackendOptions opts_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  std::unique_ptr<Staging> staging_;
  std::map<std::tuple<const void*, DType, int64_t, int64_t>, const uint8_t*> by_host_;
  std::map<const uint8_t*, std::unique_ptr<DeviceWeight>> weights_;  // by device raw pointer
  std::map<const KvCache*, std::unique_ptr<DeviceKv>> kv_;
  DeviceBuffer xb_;              // activations in BF16 for the cuBLAS path
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
  auto it = kv_.find(c.cache);
  SSD_CHECK(it != kv_.end(), "cuda attention: the KV cache was never written on this backend");
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
  const int32_t* dtab = staging_->in(tables_.data(), tables_.size());
  const cuda::QueryDesc* dqd = staging_->in(queries_.data(), queries_.size());
  const int64_t* dvis = staging_->in(c.visible, static_cast<size_t>(n_vis));
  const int32_t* dhead = staging_->in(c.kv_head_of, c.kv_head_of ? c.n_heads : 0);
  cuda::launch_attention(dq, dout, c.n, c.n_heads, c.n_kv_heads, c.head_dim, dhead, c.layer,
                         c.scale, it->second->geometry(), dtab, dqd, dvis, stream_);
  staging_->finish();
}

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(const CudaBackendOptions& opts) {
  return std::make_unique<CudaBackend>(opts);
}

}  // namespace ssd
