// RAII device memory: one cudaMalloc'd block, movable, not copyable (a hidden deep copy of device
// memory would be a cost nobody sees). grow() reallocates without preserving contents. Also the
// one test of whether a pointer the caller gave is device memory (used in place) or host memory
// (staged).
#pragma once

#include <cstddef>
#include <utility>

#include "kernels/cuda/cuda_check.h"

namespace ssd::cuda {

// True for device (or managed) memory; false for host memory and for anything CUDA does not know.
inline bool is_device_pointer(const void* p) {
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes) { grow(bytes); }
  ~DeviceBuffer() { reset(); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept
      : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      reset();
      ptr_ = std::exchange(o.ptr_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }

  // At least `bytes` bytes (contents not preserved when it reallocates).
  void grow(size_t bytes) {
    if (bytes <= bytes_) return;
    reset();
    SSD_CUDA_CHECK(cudaMalloc(&ptr_, bytes));
    bytes_ = bytes;
  }
  void reset() noexcept {
    if (ptr_) (void)cudaFree(ptr_);  // never throws from a destructor
    ptr_ = nullptr;
    bytes_ = 0;
  }

  template <class T = void>
  T* get() const {
    return static_cast<T*>(ptr_);
  }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace ssd::cuda
