// CudaBackend (cuda_backend_impl.h): its lifetime, memory, weights and the per-op kernels
// (matmul, embedding, RMSNorm, RoPE, SwiGLU, adds). cuda_backend.h says what runs where and why.
//   - Activations: allocate() is device memory, upload / copy are async on the stream, download
//     waits for the stream. The Transformer keeps its activations there, so its ops get device
//     pointers and a forward enqueues kernels without waiting until it downloads the logits.
//   - Staging (staging.h): device pointers are used in place, host pointers staged.
//   - Weights: raw file bytes uploaded once, which embedding rows and the batch-invariant matmul
//     (decode, verification, drafting) decode in the kernel exactly as the CPU does
//     (kernels/common/dequant.h), plus a BF16 copy decoded on the device for the cuBLAS GEMMs of
//     prefill. A tensor prepared twice (tied embeddings / LM head) is uploaded once.
// The other concerns live beside it: kv_attention.cpp, tp_exchange.cpp, graph_replay.cpp,
// fused_walks.cpp.
// Compiled here against CUDA 13 (no GPU on the build machine): not yet run on a device.
#include "runtime/backend/cuda/cuda_backend.h"

#include <cublas_v2.h>

#include <memory>
#include <utility>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/kernels.cuh"
#include "runtime/backend/cuda/cuda_backend_impl.h"
#include "runtime/core/error.h"

namespace ssd::cuda {
namespace {

// BackendBuffer's free function: needs no backend (a buffer may outlive it); never throws.
void free_device(void* p) noexcept { (void)cudaFree(p); }

}  // namespace

CudaBackend::CudaBackend(const CudaBackendOptions& o) : opts_(o) {
  const int count = cuda_device_count();
  SSD_CHECK(count > 0, "--backend cuda: no CUDA device is available (driver or GPU missing)");
  SSD_CHECK(o.device >= 0 && o.device < count, "CUDA device {} does not exist ({} found)", o.device,
            count);
  SSD_CUDA_CHECK(cudaSetDevice(o.device));
  SSD_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  SSD_CUBLAS_CHECK(cublasCreate(&blas_));
  SSD_CUBLAS_CHECK(cublasSetStream(blas_, stream_));
  staging_ = std::make_unique<Staging>(stream_, o.sync_each_op);
  graphs_ = std::make_unique<CudaGraphSet>(stream_);
  SSD_CUDA_CHECK(cudaEventCreateWithFlags(&arena_free_, cudaEventDisableTiming));
}

CudaBackend::~CudaBackend() {
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

int64_t CudaBackend::graphs_ready() const {
  int64_t n = 0;
  for (const auto& [key, st] : steps_) n += st.captured && st.epoch == epoch_ ? 1 : 0;
  return n;
}

void CudaBackend::enter() {
  SSD_CUDA_CHECK(cudaSetDevice(opts_.device));
  staging_->begin();
  if (region_ == Region::None && kv_.has_dead()) {
    SSD_CUDA_CHECK(cudaStreamSynchronize(stream_));  // queued kernels may read those pools
    kv_.prune();
    ++epoch_;  // a graph keyed by a dead cache's address must not replay on a new one's
  }
}

const DeviceWeight& CudaBackend::weight(const Weight& w) const {
  auto it = weights_.find(w.data);
  SSD_CHECK(it != weights_.end(),
            "cuda backend: a weight matrix ({} x {}) that this backend did not prepare", w.rows,
            w.cols);
  return *it->second;
}

BackendBuffer CudaBackend::allocate(size_t bytes) {
  SSD_CUDA_CHECK(cudaSetDevice(opts_.device));
  void* p = nullptr;
  SSD_CUDA_CHECK(cudaMalloc(&p, bytes));
  BackendBuffer buf(p, bytes, &free_device);
  ++epoch_;  // graphs captured before may read a buffer this one replaces
  SSD_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, stream_));
  return buf;
}

void CudaBackend::upload(void* dst, const void* src, size_t bytes) {
  SSD_CHECK(staging_->mode() != Staging::Mode::Record,
            "cuda backend: upload inside a replayable region");
  if (bytes == 0) return;
  SSD_CUDA_CHECK(cudaSetDevice(opts_.device));
  SSD_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_));
}

void CudaBackend::download(void* dst, const void* src, size_t bytes) {
  SSD_CHECK(staging_->mode() != Staging::Mode::Record,
            "cuda backend: download inside a replayable region");
  SSD_CUDA_CHECK(cudaSetDevice(opts_.device));
  // The exchanges' watchdog first: a copy into pageable memory returns only once it is done, so
  // a copy queued behind the collective of a dead peer would block here for ever, before the
  // watchdog could end the job with its message. Once the exchanges are waited for, nothing on
  // the stream depends on a peer and the copy cannot hang on one.
  wait_exchanges();
  if (bytes > 0) SSD_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_));
  SSD_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void CudaBackend::copy(void* dst, const void* src, size_t bytes) {
  if (bytes == 0 || dst == src || !live()) return;
  SSD_CUDA_CHECK(cudaSetDevice(opts_.device));
  SSD_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_));
}

Weight CudaBackend::prepare_weight(const TensorRef& t) {
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
    SSD_CUDA_CHECK(
        cudaMemcpyAsync(dw->raw.get(), t.data, raw_bytes, cudaMemcpyHostToDevice, stream_));
    dw->bf16.grow(static_cast<size_t>(w.rows * w.cols) * sizeof(uint16_t));
    launch_dequant_to_bf16(w.type, dw->raw.get<uint8_t>(), w.row_bytes, w.rows, w.cols,
                           dw->bf16.get<uint16_t>(), stream_);
    SSD_CUDA_CHECK(cudaStreamSynchronize(stream_));
    const uint8_t* dev = dw->raw.get<uint8_t>();
    weights_[dev] = std::move(dw);
    it = by_host_.emplace(key, dev).first;
  }
  w.data = it->second;  // device bytes: only this backend reads them
  return w;
}

void CudaBackend::matmul(const Weight& w, const float* x, float* y, int64_t n) {
  enter();
  const DeviceWeight& dw = weight(w);
  const float* dx = staging_->in(x, static_cast<size_t>(n * w.cols));
  float* dy = staging_->out(y, static_cast<size_t>(n * w.rows));
  if (!live()) {
    SSD_ASSERT(n <= opts_.invariant_max_tokens);  // regions never reach the cuBLAS path
  } else if (n <= opts_.invariant_max_tokens) {
    // The stored bytes, decoded in the kernel (matmul.cu): decode reads Q4_1, not BF16.
    launch_matmul_invariant(w.type, dw.raw.get<uint8_t>(), w.row_bytes, dx, dy, n, w.rows, w.cols,
                            stream_);
  } else {
    // y^T [rows, n] = W [rows, cols] x^T: column-major GEMM with W^T stored row-major.
    const size_t xb_bytes = static_cast<size_t>(n * w.cols) * sizeof(uint16_t);
    if (xb_.bytes() < xb_bytes) {  // an earlier GEMM may still read the old buffer
      SSD_CUDA_CHECK(cudaStreamSynchronize(stream_));
      xb_.grow(xb_bytes);
    }
    launch_f32_to_bf16(dx, xb_.get<uint16_t>(), n * w.cols, stream_);
    const float one = 1.0f, zero = 0.0f;
    SSD_CUBLAS_CHECK(cublasGemmEx(
        blas_, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(w.rows), static_cast<int>(n),
        static_cast<int>(w.cols), &one, dw.bf16.get(), CUDA_R_16BF, static_cast<int>(w.cols),
        xb_.get(), CUDA_R_16BF, static_cast<int>(w.cols), &zero, dy, CUDA_R_32F,
        static_cast<int>(w.rows), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  }
  staging_->finish();
}

void CudaBackend::embed(const Weight& table, const int32_t* tokens, int64_t n, float* out) {
  enter();
  if (!is_device_pointer(tokens))
    for (int64_t i = 0; i < n; ++i)
      SSD_CHECK(tokens[i] >= 0 && tokens[i] < table.rows,
                "token id {} is outside the vocabulary (0..{})", tokens[i], table.rows - 1);
  weight(table);
  const int32_t* dt = staging_->in(tokens, static_cast<size_t>(n));
  float* dout = staging_->out(out, static_cast<size_t>(n * table.cols));
  if (live())
    launch_embed(table.type, table.data, table.row_bytes, table.cols, dt, n, dout, stream_);
  staging_->finish();
}

void CudaBackend::rmsnorm(const float* x, const float* g, float* y, int64_t rows, int64_t dim,
                          float eps) {
  enter();
  SSD_CHECK(dim > 0, "rmsnorm: dim must be positive, got {}", dim);
  const size_t count = static_cast<size_t>(rows * dim);
  float* dy = staging_->out(y, count);  // first: an in-place call maps x onto the same buffer
  const float* dx = staging_->in(x, count);
  if (x == y && !is_device_pointer(x))  // the in-place buffer must hold x's values
    SSD_CUDA_CHECK(cudaMemcpyAsync(dy, x, count * sizeof(float), cudaMemcpyHostToDevice, stream_));
  const float* dg = staging_->in(g, static_cast<size_t>(dim));
  if (live()) launch_rmsnorm(dx, dg, dy, rows, dim, eps, stream_);
  staging_->finish();
}

void CudaBackend::rope(float* x, int64_t n, int64_t n_heads, int64_t head_dim, int64_t rot_dim,
                       const int32_t* positions, const float* inv_freq, RopeLayout layout) {
  enter();
  SSD_CHECK(rot_dim % 2 == 0 && rot_dim >= 0 && rot_dim <= head_dim,
            "rope: rot_dim {} must be even and at most head_dim {}", rot_dim, head_dim);
  float* dx = staging_->inout(x, static_cast<size_t>(n * n_heads * head_dim));
  const int32_t* dp = staging_->in(positions, static_cast<size_t>(n));
  const float* df = staging_->in(inv_freq, static_cast<size_t>(rot_dim / 2));
  if (live())
    launch_rope(dx, n, n_heads, head_dim, rot_dim, dp, df, layout == RopeLayout::NeoX, stream_);
  staging_->finish();
}

void CudaBackend::swiglu(const float* gate, const float* up, float* out, int64_t count) {
  enter();
  float* dout = staging_->out(out, static_cast<size_t>(count));
  const float* dg = gate == out ? dout : staging_->in(gate, static_cast<size_t>(count));
  const float* du = up == out ? dout : staging_->in(up, static_cast<size_t>(count));
  if (!is_device_pointer(out) && (gate == out || up == out))
    SSD_CUDA_CHECK(
        cudaMemcpyAsync(dout, out, count * sizeof(float), cudaMemcpyHostToDevice, stream_));
  if (live()) launch_swiglu(dg, du, dout, count, stream_);
  staging_->finish();
}

void CudaBackend::add(float* y, const float* x, int64_t count) {
  enter();
  float* dy = staging_->inout(y, static_cast<size_t>(count));
  const float* dx = staging_->in(x, static_cast<size_t>(count));
  if (live()) launch_add(dy, dx, count, stream_);
  staging_->finish();
}

void CudaBackend::add_bias(float* y, const float* b, int64_t rows, int64_t cols) {
  enter();
  float* dy = staging_->inout(y, static_cast<size_t>(rows * cols));
  const float* db = staging_->in(b, static_cast<size_t>(cols));
  if (live()) launch_add_bias(dy, db, rows, cols, stream_);
  staging_->finish();
}

}  // namespace ssd::cuda

namespace ssd {

std::unique_ptr<Backend> make_cuda_backend(const CudaBackendOptions& opts) {
  return std::make_unique<cuda::CudaBackend>(opts);
}

CudaBackendHandle cuda_backend_handle(Backend& be) {
  auto* cb = dynamic_cast<cuda::CudaBackend*>(&be);
  SSD_CHECK(cb, "the {} backend is not a CUDA backend", be.name());
  return CudaBackendHandle{cb->stream(), cb->device()};
}

int64_t cuda_graphs_ready(Backend& be) {
  auto* cb = dynamic_cast<cuda::CudaBackend*>(&be);
  return cb ? cb->graphs_ready() : 0;
}

}  // namespace ssd
