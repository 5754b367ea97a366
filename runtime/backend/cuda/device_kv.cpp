// DeviceKv (device_kv.h): the mirror's constructor and its page copies, queued on the backend's
// stream (or deferred until flush() inside a replayable region).
// Compiled here against CUDA 13 (no GPU on the build machine): not yet run on a device.
#include "runtime/backend/cuda/device_kv.h"

#include "kernels/cuda/cuda_check.h"

namespace ssd::cuda {

DeviceKv::DeviceKv(KvCache& cache, int device, cudaStream_t s)
    : cache_(&cache),
      device_(device),
      stream_(s),
      n_layers_(cache.config().n_layers),
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

DeviceKv::~DeviceKv() {
  if (cache_ && cache_->page_observer() == this) cache_->set_page_observer(nullptr);
}

void DeviceKv::page_copied(int32_t src, int32_t dst) {
  const size_t bytes = static_cast<size_t>(geo_.page_floats) * sizeof(float);
  enqueue_copy(page(dst), page(src), bytes);
}

void DeviceKv::slot_copied(int32_t src_page, int64_t src_slot, int32_t dst_page, int64_t dst_slot) {
  const size_t bytes = static_cast<size_t>(geo_.row) * sizeof(float);
  for (int64_t l = 0; l < n_layers_; ++l) {
    for (int64_t kv = 0; kv < 2; ++kv) {
      const int64_t off = l * geo_.layer_stride + kv * geo_.v_offset;
      enqueue_copy(page(dst_page) + off + dst_slot * geo_.row,
                   page(src_page) + off + src_slot * geo_.row, bytes);
    }
  }
}

void DeviceKv::cache_destroyed(const KvCache& cache) noexcept {
  (void)cache;
  cache_ = nullptr;
  pending_.clear();  // copies between pages nobody will read again
}

void DeviceKv::flush() {
  if (pending_.empty()) return;
  SSD_CUDA_CHECK(cudaSetDevice(device_));
  for (const PendingCopy& c : pending_)
    SSD_CUDA_CHECK(cudaMemcpyAsync(c.dst, c.src, c.bytes, cudaMemcpyDeviceToDevice, stream_));
  pending_.clear();
}

void DeviceKv::enqueue_copy(float* dst, const float* src, size_t bytes) {
  if (deferred_) {
    pending_.push_back({dst, src, bytes});
    return;
  }
  SSD_CUDA_CHECK(cudaSetDevice(device_));
  SSD_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_));
}

}  // namespace ssd::cuda
