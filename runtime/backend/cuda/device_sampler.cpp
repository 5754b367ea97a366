// DeviceSampler (see device_sampler.h): owns a stream and the row scratch (grown to the largest
// vocabulary seen), stages host logits, runs the kernels of device_sampler.cu (or the argmax
// kernel for greedy rows), and turns an invalid row into the CPU sampler's error message.
#include "runtime/backend/cuda/device_sampler.h"

#include <vector>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/device_sampler_kernels.cuh"
#include "kernels/cuda/kernels.cuh"
#include "runtime/backend/cuda/cuda_backend.h"
#include "runtime/core/error.h"

namespace ssd {

using cuda::DeviceBuffer;

struct DeviceSampler::State {
  int device = 0;
  cudaStream_t stream = nullptr;
  bool owns_stream = true;
  int32_t capacity = 0;     // tokens the buffers below hold
  size_t sort_bytes = 0;    // CUB scratch for the current row's keys
  DeviceBuffer logits;      // [capacity] staged host logits
  DeviceBuffer e, keys, sorted, sort_tmp, ids, probs;
  DeviceBuffer scan;        // [process_scan_doubles(capacity)] the block scans' scratch
  DeviceBuffer stats;       // one cuda::RowStats
  DeviceBuffer token;       // one int32
};

DeviceSampler::DeviceSampler(int device) : s_(std::make_unique<State>()) {
  const int count = cuda_device_count();
  SSD_CHECK(count > 0, "device sampler: no CUDA device is available (driver or GPU missing)");
  SSD_CHECK(device >= 0 && device < count,
            "device sampler: CUDA device {} does not exist ({} found)", device, count);
  s_->device = device;
  SSD_CUDA_CHECK(cudaSetDevice(device));
  SSD_CUDA_CHECK(cudaStreamCreateWithFlags(&s_->stream, cudaStreamNonBlocking));
}

DeviceSampler::DeviceSampler(int device, void* stream) : s_(std::make_unique<State>()) {
  const int count = cuda_device_count();
  SSD_CHECK(device >= 0 && device < count,
            "device sampler: CUDA device {} does not exist ({} found)", device, count);
  s_->device = device;
  s_->stream = static_cast<cudaStream_t>(stream);
  s_->owns_stream = false;
}

DeviceSampler::~DeviceSampler() {
  if (s_->stream && s_->owns_stream) {
    (void)cudaSetDevice(s_->device);
    (void)cudaStreamDestroy(s_->stream);
  }
}

void DeviceSampler::run(const float* logits, int32_t n, const SamplerConfig& cfg) {
  validate(cfg);
  SSD_CHECK(n > 0, "sampler: empty logits (n = {})", n);
  SSD_CUDA_CHECK(cudaSetDevice(s_->device));
  State& s = *s_;
  if (n > s.capacity) {
    const size_t un = static_cast<size_t>(n);
    s.logits.grow(un * sizeof(float));
    s.e.grow(un * sizeof(double));
    s.keys.grow(un * sizeof(uint64_t));
    s.sorted.grow(un * sizeof(uint64_t));
    s.ids.grow(un * sizeof(int32_t));
    s.probs.grow(un * sizeof(double));
    s.scan.grow(cuda::process_scan_doubles(n) * sizeof(double));
    s.stats.grow(sizeof(cuda::RowStats));
    s.token.grow(sizeof(int32_t));
    s.capacity = n;
  }
  s.sort_bytes = cuda::process_sort_scratch_bytes(n);  // host-side query, no device work
  s.sort_tmp.grow(s.sort_bytes);
  const float* dl = logits;
  if (!cuda::is_device_pointer(logits)) {
    SSD_CUDA_CHECK(cudaMemcpyAsync(s.logits.get(), logits, static_cast<size_t>(n) * sizeof(float),
                                   cudaMemcpyHostToDevice, s.stream));
    dl = s.logits.get<float>();
  }
  if (is_greedy(cfg)) {
    cuda::launch_argmax_rows(dl, 1, n, s.token.get<int32_t>(), s.stream);
    return;
  }
  cuda::ProcessScratch sc;
  sc.e = s.e.get<double>();
  sc.keys = s.keys.get<uint64_t>();
  sc.sorted = s.sorted.get<uint64_t>();
  sc.sort_tmp = s.sort_tmp.get();
  sc.sort_bytes = s.sort_bytes;
  sc.stats = s.stats.get<cuda::RowStats>();
  sc.scan = s.scan.get<double>();
  cuda::launch_process_row(dl, n, static_cast<double>(cfg.temperature), cfg.top_k,
                           static_cast<double>(cfg.top_p), static_cast<double>(cfg.min_p), sc,
                           s.ids.get<int32_t>(), s.probs.get<double>(), s.stream);
}

void DeviceSampler::check_row(int32_t n, const SamplerConfig& cfg) {
  if (is_greedy(cfg)) {
    int32_t token = -1;
    SSD_CUDA_CHECK(cudaMemcpy(&token, s_->token.get(), sizeof token, cudaMemcpyDeviceToHost));
    SSD_CHECK(token >= 0, "argmax: all {} logits are NaN", n);
    return;
  }
  cuda::RowStats st;
  SSD_CUDA_CHECK(cudaMemcpy(&st, s_->stats.get(), sizeof st, cudaMemcpyDeviceToHost));
  SSD_CHECK(st.inf_at < 0, "sampler: logit of token {} is +inf", st.inf_at);
  SSD_CHECK(st.n_valid > 0, "sampler: all {} logits are -inf or NaN", n);
  SSD_ASSERT(st.keep > 0 && st.keep <= n);
}

ProcessedDist DeviceSampler::process(const float* logits, int32_t n, const SamplerConfig& cfg) {
  run(logits, n, cfg);
  SSD_CUDA_CHECK(cudaStreamSynchronize(s_->stream));
  check_row(n, cfg);
  ProcessedDist d;
  if (is_greedy(cfg)) {
    int32_t token = -1;
    SSD_CUDA_CHECK(cudaMemcpy(&token, s_->token.get(), sizeof token, cudaMemcpyDeviceToHost));
    d.tokens.assign(1, TokenProb{token, 1.0});
    return d;
  }
  cuda::RowStats st;
  SSD_CUDA_CHECK(cudaMemcpy(&st, s_->stats.get(), sizeof st, cudaMemcpyDeviceToHost));
  std::vector<int32_t> ids(static_cast<size_t>(st.keep));
  std::vector<double> probs(static_cast<size_t>(st.keep));
  SSD_CUDA_CHECK(cudaMemcpy(ids.data(), s_->ids.get(), ids.size() * sizeof(int32_t),
                            cudaMemcpyDeviceToHost));
  SSD_CUDA_CHECK(cudaMemcpy(probs.data(), s_->probs.get(), probs.size() * sizeof(double),
                            cudaMemcpyDeviceToHost));
  d.tokens.resize(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) d.tokens[i] = {ids[i], probs[i]};
  return d;
}

int32_t DeviceSampler::sample(const float* logits, int32_t n, const SamplerConfig& cfg,
                              uint64_t stream, uint32_t step) {
  run(logits, n, cfg);
  if (!is_greedy(cfg))
    cuda::launch_draw_row(s_->probs.get<double>(), s_->ids.get<int32_t>(),
                          s_->stats.get<cuda::RowStats>(), cfg.seed, stream, step, kLaneToken,
                          s_->scan.get<double>(), s_->token.get<int32_t>(), s_->stream);
  SSD_CUDA_CHECK(cudaStreamSynchronize(s_->stream));
  check_row(n, cfg);
  int32_t token = -1;
  SSD_CUDA_CHECK(cudaMemcpy(&token, s_->token.get(), sizeof token, cudaMemcpyDeviceToHost));
  return token;
}

}  // namespace ssd
