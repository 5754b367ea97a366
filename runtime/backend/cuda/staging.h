// How a CudaBackend op sees the pointers it is given. Device (or managed) pointers are used in
// place. Host pointers are staged, by mode:
//   Eager    copied to per-op device scratch (inputs before the kernel, outputs after it, with a
//            wait for the stream only when there are outputs, or every op with sync_each_op).
//            Reusing a scratch buffer for the next op needs no wait: its upload is in stream
//            order after the kernel that read it, and cudaMemcpyAsync from pageable host memory
//            has taken the bytes when it returns. The same host pointer given twice in one op
//            (rmsnorm in place) maps to one buffer.
//   Record   inside a replayable region (captured or replayed as a CUDA graph): each host input
//            is copied into the next slot of a pinned host arena and the op gets the matching
//            address in a device arena; the whole arena is uploaded once, just before the graph
//            is launched. Slots are handed out in call order with a size fixed by the key (a
//            `capacity` for inputs whose length varies: page tables, visible lists), so the
//            captured kernels read the same addresses at every replay. Host outputs are an error.
//   Measure  eager, but counts the arena a Record pass of the same region would use.
// Compiled here against CUDA 13 (no GPU on the build machine): not yet run on a device.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_buffer.h"
#include "runtime/core/error.h"

namespace ssd::cuda {

// The two halves of a replayable region's input arena: pinned host bytes and device bytes.
struct ArenaView {
  uint8_t* host = nullptr;  // [capacity] pinned
  uint8_t* dev = nullptr;   // [capacity]
  size_t capacity = 0;
};

class Staging {
 public:
  enum class Mode { Eager, Measure, Record };
  static constexpr size_t kSlotAlign = 256;

  Staging(cudaStream_t s, bool sync_each_op) : stream_(s), sync_each_op_(sync_each_op) {}

  // Enters `mode` for a region (arena only for Record); the arena cursor starts at 0.
  void set_mode(Mode mode, ArenaView arena = {}) {
    mode_ = mode;
    arena_ = arena;
    cursor_ = 0;
  }
  Mode mode() const { return mode_; }
  // Arena bytes the region's host inputs took so far (Measure and Record).
  size_t arena_used() const { return cursor_; }

  // Device view of `count` T at p: copied in when `in`, copied back at finish() when `out`. In a
  // region, the arena slot holds max(count, capacity) T.
  template <class T>
  T* map(const T* p, size_t count, size_t capacity, bool in, bool out) {
    // A null input with a capacity (an empty visible list) still takes its slot, so the slots
    // of a region do not depend on the contents.
    if (p == nullptr && capacity == 0) return nullptr;
    const size_t bytes = p ? count * sizeof(T) : 0;
    const size_t slot_bytes = std::max(count, capacity) * sizeof(T);
    if (slot_bytes == 0 || (p && is_device_pointer(p))) return const_cast<T*>(p);
    const size_t offset = cursor_;
    if (mode_ != Mode::Eager) cursor_ += (slot_bytes + kSlotAlign - 1) / kSlotAlign * kSlotAlign;
    if (mode_ == Mode::Record) {
      SSD_CHECK(!out, "cuda backend: an op in a replayable region writes host memory");
      SSD_CHECK(cursor_ <= arena_.capacity,
                "cuda backend: a replayable region needs {} arena bytes, {} were measured",
                cursor_, arena_.capacity);
      if (in && bytes > 0) std::memcpy(arena_.host + offset, p, bytes);
      return reinterpret_cast<T*>(arena_.dev + offset);
    }
    if (bytes == 0) return const_cast<T*>(p);
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
  const T* in(const T* p, size_t count, size_t capacity = 0) {
    return map(p, count, capacity, true, false);
  }
  template <class T>
  T* out(T* p, size_t count) {
    return map(static_cast<const T*>(p), count, 0, false, true);
  }
  template <class T>
  T* inout(T* p, size_t count) {
    return map(static_cast<const T*>(p), count, 0, true, true);
  }

  // Forgets the previous op's mappings (called first by every op, so an op that threw halfway
  // leaves nothing behind).
  void begin() {
    entries_.clear();
    used_ = 0;
  }

  // Copies host outputs back and waits for them; an op on device memory only returns at once
  // (its errors surface at the next wait: a download, or every op with sync_each_op). Never
  // waits in Record mode (capture forbids it; a replay launches nothing until the region ends).
  void finish() {
    bool wait = sync_each_op_ && mode_ != Mode::Record;
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
  Mode mode_ = Mode::Eager;
  ArenaView arena_;
  size_t cursor_ = 0;
  std::vector<DeviceBuffer> buffers_;  // grown, reused across ops
  size_t used_ = 0;
  std::vector<Entry> entries_;
};

}  // namespace ssd::cuda
