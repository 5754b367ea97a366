// Memory owned by a backend: host memory for the CPU backend, device memory for the CUDA one.
// The transformer keeps its activations (residual stream, per-block scratch, logits rows) in
// these, so that on a device a forward is a sequence of kernels on device memory and the only
// host traffic is what the model code asks for by name (Backend::upload / download / copy).
//
// Movable, not copyable (a hidden deep copy of device memory would be a cost nobody sees). The
// buffer frees itself through the function the backend gave it, which needs no backend object,
// so a buffer may outlive the backend that allocated it. Contents are not preserved when a
// buffer is regrown (reserve_floats in backend.h).
#pragma once

#include <cstddef>
#include <utility>

namespace ssd {

class BackendBuffer {
 public:
  using FreeFn = void (*)(void*) noexcept;

  BackendBuffer() = default;
  BackendBuffer(void* p, size_t bytes, FreeFn free_fn) : p_(p), bytes_(bytes), free_(free_fn) {}
  ~BackendBuffer() { reset(); }
  BackendBuffer(const BackendBuffer&) = delete;
  BackendBuffer& operator=(const BackendBuffer&) = delete;
  BackendBuffer(BackendBuffer&& o) noexcept
      : p_(std::exchange(o.p_, nullptr)),
        bytes_(std::exchange(o.bytes_, 0)),
        free_(std::exchange(o.free_, nullptr)) {}
  BackendBuffer& operator=(BackendBuffer&& o) noexcept {
    if (this != &o) {
      reset();
      p_ = std::exchange(o.p_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
      free_ = std::exchange(o.free_, nullptr);
    }
    return *this;
  }

  void reset() noexcept {
    if (p_ && free_) free_(p_);
    p_ = nullptr;
    bytes_ = 0;
    free_ = nullptr;
  }
  // Backend memory: pass to the backend's ops, never dereference on the host (it may be device
  // memory); read it through Backend::download.
  float* data() const { return static_cast<float*>(p_); }
  size_t bytes() const { return bytes_; }

 private:
  void* p_ = nullptr;
  size_t bytes_ = 0;
  FreeFn free_ = nullptr;
};

}  // namespace ssd
