// DeviceKv: the device mirror of one KvCache's pages, and why it is a mirror.
//
// The host KvCache owns the bookkeeping (page tables, reference counts, truncate / fork /
// release); the CUDA backend owns the bytes. The mirror has the same page ids and the same
// layout as the host pages (all pages allocated up front: max_pages x page bytes) and observes
// the cache (KvPageObserver) to repeat its copy-on-write page copies and compaction moves on the
// device, in stream order before the next kernel: never a round trip through the host. One
// mirror per live cache object (kv_mirrors.h: keyed by KvCache::id, freed at the first op after
// the cache is destroyed). Inside a captured or replayed region the copies are deferred and
// enqueued by flush(), before the graph (graph_replay.cpp says why that order is the eager one).
// Compiled here against CUDA 13 (no GPU on the build machine): not yet run on a device.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/kernels.cuh"
#include "runtime/kv/kv_cache.h"

namespace ssd::cuda {

class DeviceKv final : public KvPageObserver {
 public:
  DeviceKv(KvCache& cache, int device, cudaStream_t s);
  ~DeviceKv() override;
  DeviceKv(const DeviceKv&) = delete;
  DeviceKv& operator=(const DeviceKv&) = delete;

  void page_copied(int32_t src, int32_t dst) override;
  void slot_copied(int32_t src_page, int64_t src_slot, int32_t dst_page, int64_t dst_slot) override;
  void cache_destroyed(const KvCache& cache) noexcept override;
  bool dead() const { return cache_ == nullptr; }

  // Inside a captured or replayed region the copies wait (a graph must not contain them) and
  // are enqueued by flush(), before the graph: copy-on-write happens at a step's first KV write,
  // before any of the step's kernels touches the cache, so the order is the eager one.
  void set_deferred(bool on) { deferred_ = on; }
  void flush();

  const PagedKv& geometry() const { return geo_; }
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
  void enqueue_copy(float* dst, const float* src, size_t bytes);

  KvCache* cache_;  // null once the cache was destroyed
  int device_;
  cudaStream_t stream_;
  int64_t n_layers_, max_pages_;
  DeviceBuffer pool_;  // [max_pages, page_floats]
  PagedKv geo_;
  bool deferred_ = false;
  std::vector<PendingCopy> pending_;
};

}  // namespace ssd::cuda
