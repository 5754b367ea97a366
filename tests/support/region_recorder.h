// A Backend for tests of the replayable-region contract (Backend::begin_replayable): it runs
// every op on the CPU backend and records the regions a model opens (their keys, in order), the
// regions ended, when buffers were allocated (how many regions had begun by then), and
// violations (an allocate, upload, download or nested begin inside a region, an end outside
// one). Used by tests/unit/engine/replayable_region_test.cpp and forward_warmup_test.cpp.
#pragma once

#include <memory>
#include <vector>

#include "runtime/backend/backend.h"

namespace ssd::test {

class RegionRecorder final : public Backend {
 public:
  explicit RegionRecorder(bool host_exchanges = false)
      : cpu_(make_cpu_backend(1)), host_exchanges_(host_exchanges) {}
  std::vector<ReplayKey> keys;
  int ended = 0, violations = 0;
  int exchanges = 0, exchanges_in_regions = 0;
  std::vector<size_t> allocated_at;  // keys.size() at each allocate()

  const char* name() const override { return "region-recorder"; }
  int threads() const override { return 1; }
  BackendBuffer allocate(size_t bytes) override {
    violations += open_;
    allocated_at.push_back(keys.size());
    return cpu_->allocate(bytes);
  }
  void upload(void* d, const void* s, size_t b) override {
    violations += open_;
    cpu_->upload(d, s, b);
  }
  void download(void* d, const void* s, size_t b) override {
    violations += open_;
    cpu_->download(d, s, b);
  }
  void copy(void* d, const void* s, size_t b) override { cpu_->copy(d, s, b); }
  void begin_replayable(const ReplayKey& key) override {
    violations += open_;
    open_ = true;
    keys.push_back(key);
  }
  void end_replayable() override {
    violations += !open_;
    open_ = false;
    ++ended;
  }
  void abort_replayable() noexcept override { open_ = false; }
  Weight prepare_weight(const TensorRef& t) override {
    return cpu_->prepare_weight(t);
  }
  void matmul(const Weight& w, const float* x, float* y, int64_t n) override {
    cpu_->matmul(w, x, y, n);
  }
  void embed(const Weight& t, const int32_t* tok, int64_t n, float* o) override {
    cpu_->embed(t, tok, n, o);
  }
  void rmsnorm(const float* x, const float* g, float* y, int64_t r, int64_t d, float e) override {
    cpu_->rmsnorm(x, g, y, r, d, e);
  }
  void rope(float* x, int64_t n, int64_t h, int64_t hd, int64_t rd, const int32_t* p,
            const float* f, RopeLayout l) override {
    cpu_->rope(x, n, h, hd, rd, p, f, l);
  }
  void store_kv(KvCache& c, int64_t l, const SeqId* s, const int64_t* cp, const float* k,
                const float* v, int64_t n) override {
    cpu_->store_kv(c, l, s, cp, k, v, n);
  }
  void attention(const AttentionCall& c) override { cpu_->attention(c); }
  void swiglu(const float* g, const float* u, float* o, int64_t n) override {
    cpu_->swiglu(g, u, o, n);
  }
  void add(float* y, const float* x, int64_t n) override { cpu_->add(y, x, n); }
  void add_bias(float* y, const float* b, int64_t r, int64_t c) override {
    cpu_->add_bias(y, b, r, c);
  }
  bool exchanges_replayable(Collective& c) override {
    return !host_exchanges_ && cpu_->exchanges_replayable(c);
  }
  void allreduce_sum(Collective& c, float* y, int64_t n, float* scratch) override {
    exchanged(c);
    if (host_exchanges_) Backend::allreduce_sum(c, y, n, scratch);
    else cpu_->allreduce_sum(c, y, n, scratch);
  }
  void gather_columns(Collective& c, const float* local, int64_t rows,
                      const std::vector<int64_t>& off, float* out, float* scratch) override {
    exchanged(c);
    if (host_exchanges_) Backend::gather_columns(c, local, rows, off, out, scratch);
    else cpu_->gather_columns(c, local, rows, off, out, scratch);
  }

 private:
  void exchanged(Collective& c) {
    ++exchanges;
    exchanges_in_regions += open_;
    violations += open_ && !exchanges_replayable(c);
  }
  std::unique_ptr<Backend> cpu_;
  bool host_exchanges_ = false;
  bool open_ = false;
};

}  // namespace ssd::test
