// Sampling on a CUDA device with exactly the CPU sampler's result: process() builds, on the
// device, the list ssd::process() builds (the same ids, the same probability bits) and sample()
// draws the token Sampler::sample draws for the same (seed, stream, step), from the same Philox
// uniform. Top-k, top-p, min-p and temperature all run on the device (the plan, and why it is
// lossless: kernels/common/process_math.h; the kernels: device_sampler.cu).
//
// Where it stands: the DeviceTokenPicker (device_token_picker.h) samples the CUDA target's
// decode steps with it, on the logits the forward left on the device. Free of CUDA headers, like
// cuda_backend.h. Not yet run on a GPU (tests/unit/cuda/device_sampler_test.cpp compares it with
// the CPU where one exists).
#pragma once

#include <cstdint>
#include <memory>

#include "runtime/sampling/sampler.h"

namespace ssd {

class DeviceSampler {
 public:
  // Works on `device`; throws ssd::Error when it cannot be used.
  explicit DeviceSampler(int device = 0);
  // Works on `device` in order with `stream` (a cudaStream_t the caller owns and keeps alive,
  // e.g. a CUDA backend's, so that logits a forward left there are read after it wrote them).
  DeviceSampler(int device, void* stream);
  ~DeviceSampler();
  DeviceSampler(const DeviceSampler&) = delete;
  DeviceSampler& operator=(const DeviceSampler&) = delete;

  // ssd::process(logits, n, cfg), computed on the device (greedy: the one-hot argmax). logits:
  // [n], device or host memory. The same errors as the CPU sampler, with its messages.
  ProcessedDist process(const float* logits, int32_t n, const SamplerConfig& cfg);
  // Sampler(cfg).sample(logits, n, stream, step), drawn on the device.
  int32_t sample(const float* logits, int32_t n, const SamplerConfig& cfg, uint64_t stream,
                 uint32_t step);

 private:
  struct State;
  // Runs the row's kernels; greedy rows run the argmax kernel instead. Leaves the results on
  // the device.
  void run(const float* logits, int32_t n, const SamplerConfig& cfg);
  // Throws the CPU sampler's message for an invalid row (reads the row's stats).
  void check_row(int32_t n, const SamplerConfig& cfg);
  std::unique_ptr<State> s_;
};

}  // namespace ssd
