// The Transformer's side of the replayable-region contract (Backend::begin_replayable), checked
// on the CPU through a backend that wraps the CPU one and records what happens inside regions:
// a forward without TP and without hidden layers is one region keyed by (model, cache, n, logits
// rows); inside it nothing is allocated, uploaded or downloaded; a forward asking for hidden
// layers opens none; the logits are the CPU backend's bit for bit. (The CUDA backend replays
// regions as CUDA graphs: tests/unit/cuda/forward_graphs_test.cpp, GPU only.)
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "runtime/backend/backend.h"
#include "runtime/model/model_file.h"
#include "runtime/model/transformer.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tiny_model.h"

namespace ssd {
namespace {

class RegionRecorder final : public Backend {
 public:
  RegionRecorder() : cpu_(make_cpu_backend(1)) {}
  std::vector<ReplayKey> keys;
  int ended = 0, violations = 0;

  const char* name() const override { return "region-recorder"; }
  int threads() const override { return 1; }
  BackendBuffer allocate(size_t bytes) override {
    violations += open_;
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
  kernels::WeightMatrix prepare_weight(const TensorRef& t) override {
    return cpu_->prepare_weight(t);
  }
  void matmul(const kernels::WeightMatrix& w, const float* x, float* y, int64_t n) override {
    cpu_->matmul(w, x, y, n);
  }
  void embed(const kernels::WeightMatrix& t, const int32_t* tok, int64_t n, float* o) override {
    cpu_->embed(t, tok, n, o);
  }
  void rmsnorm(const float* x, const float* g, float* y, int64_t r, int64_t d, float e) override {
    cpu_->rmsnorm(x, g, y, r, d, e);
  }
  void rope(float* x, int64_t n, int64_t h, int64_t hd, int64_t rd, const int32_t* p,
            const float* f, kernels::RopeLayout l) override {
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

 private:
  std::unique_ptr<Backend> cpu_;
  bool open_ = false;
};

TEST(ReplayableRegion, OneRegionPerForwardWithNoTransfersInsideAndTheCpuLogits) {
  test::TempDir tmp;
  const std::string path =
      test::write_tiny_gguf(test::tiny_spec(Arch::Llama, DType::Q8_0), tmp.file("m.gguf"));
  const ModelFile file = ModelFile::open(path);
  RegionRecorder rec;
  auto cpu = make_cpu_backend(1);
  Transformer mr(file, rec), mc(file, *cpu);
  KvCache kr(mr.kv_config(128)), kc(mc.kv_config(128));
  const SeqId sr = kr.create(), sc = kc.create();
  auto both = [&](Batch br) {
    Batch bc = br;
    for (SeqId& s : bc.seqs) s = sc;
    const ForwardResult a = mr.forward(br, kr), b = mc.forward(bc, kc);
    EXPECT_EQ(a.logits, b.logits);
    EXPECT_EQ(a.hidden, b.hidden);
  };
  both(Batch::sequence(sr, {1, 17, 200, 3}, 0));
  both(Batch::sequence(sr, {9}, 4));
  both(Batch::sequence(sr, {5, 6, 7}, 5, true));
  ASSERT_EQ(rec.keys.size(), 3u);
  EXPECT_EQ(rec.ended, 3);
  EXPECT_EQ(rec.violations, 0);
  EXPECT_EQ(rec.keys[0], (ReplayKey{&mr, &kr, 4, {3}}));
  EXPECT_EQ(rec.keys[1], (ReplayKey{&mr, &kr, 1, {0}}));
  EXPECT_EQ(rec.keys[2], (ReplayKey{&mr, &kr, 3, {0, 1, 2}}));

  Batch with_hidden = Batch::sequence(sr, {11}, 8);
  with_hidden.hidden_layers = {0};
  both(with_hidden);  // hidden layers are read back between blocks: no region
  EXPECT_EQ(rec.keys.size(), 3u);
  EXPECT_EQ(rec.violations, 0);
}

}  // namespace
}  // namespace ssd
