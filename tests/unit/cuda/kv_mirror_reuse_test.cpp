// A KV cache created at the address of a destroyed one gets its own device mirror on the CUDA
// backend (runtime/backend/cuda/kv_mirrors.h): caches of different geometry placed one after
// another in the same storage, each written, forked (copy on write) and read by attention, must
// give the CPU backend's outputs. Before the fix the second cache reused the first one's mirror
// (its head_dim, its pool, its observer registration). The bookkeeping alone is tested without a
// GPU in tests/unit/device_math/kv_mirrors_test.cpp; this case needs one and skips visibly without.
// Tolerance: 1e-5 normalised max error, as the attention case of op_compare_test.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <new>
#include <random>
#include <vector>

#include "runtime/backend/backend.h"
#include "runtime/backend/cuda/cuda_backend.h"
#include "tests/unit/cuda/skip_without_gpu.h"
#include "tests/unit/kernels/kernel_test_util.h"

namespace ssd {
namespace {

TEST(CudaKvMirror, ANewCacheAtAFreedAddressReadsItsOwnEntries) {
  SSD_SKIP_WITHOUT_GPU("KV mirror reuse on the CUDA backend");
  std::unique_ptr<Backend> cpu = make_cpu_backend(1), gpu = make_cuda_backend(0);
  std::mt19937 rng(8);
  alignas(KvCache) unsigned char storage[sizeof(KvCache)];
  for (int64_t head_dim : {64, 80, 32, 80}) {
    const int64_t layers = 2, kv_heads = 2, heads = 4, len = 21;
    const KvCacheConfig cfg{layers, kv_heads, head_dim, 16, 96 + head_dim};
    KvCache kc(cfg);
    KvCache* kg = new (storage) KvCache(cfg);  // the same address every round
    const int64_t row = kv_heads * head_dim;
    std::vector<SeqId> seqs(len);
    std::vector<int64_t> pos(len);
    for (KvCache* kv : {&kc, kg}) {
      const SeqId s = kv->create();
      kv->grow(s, len);
    }
    for (int64_t i = 0; i < len; ++i) pos[i] = i;
    for (int64_t l = 0; l < layers; ++l) {
      const auto k = kernels::test::random_floats(len * row, rng);
      const auto v = kernels::test::random_floats(len * row, rng);
      cpu->store_kv(kc, l, seqs.data(), pos.data(), k.data(), v.data(), len);
      gpu->store_kv(*kg, l, seqs.data(), pos.data(), k.data(), v.data(), len);
    }
    const SeqId fc = kc.fork(0), fg = kg->fork(0);  // copy on write at the next store
    const std::vector<int64_t> p2 = {3, 20};
    const auto k2 = kernels::test::random_floats(2 * row, rng);
    for (int64_t l = 0; l < layers; ++l) {
      const std::vector<SeqId> fs = {fc, fc}, gs = {fg, fg};
      cpu->store_kv(kc, l, fs.data(), p2.data(), k2.data(), k2.data(), 2);
      gpu->store_kv(*kg, l, gs.data(), p2.data(), k2.data(), k2.data(), 2);
    }
    const std::vector<int64_t> prefix = {21, 21}, off = {0, 0, 0};
    const auto q = kernels::test::random_floats(2 * heads * head_dim, rng);
    std::vector<float> oc(q.size()), og(q.size());
    for (int i = 0; i < 2; ++i) {
      const std::vector<SeqId> qs = {0, i == 0 ? fc : fg};
      AttentionCall c;
      c.q = q.data();
      c.out = i == 0 ? oc.data() : og.data();
      c.n = 2;
      c.n_heads = heads;
      c.n_kv_heads = kv_heads;
      c.head_dim = head_dim;
      c.layer = 1;
      c.scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
      c.cache = i == 0 ? &kc : kg;
      c.seqs = qs.data();
      c.prefix_len = prefix.data();
      c.visible_offsets = off.data();
      (i == 0 ? cpu : gpu)->attention(c);
    }
    double m = 0, d = 0;
    for (size_t i = 0; i < oc.size(); ++i) {
      m = std::max(m, std::abs(static_cast<double>(oc[i])));
      d = std::max(d, std::abs(static_cast<double>(og[i]) - oc[i]));
    }
    EXPECT_LT(d / m, 1e-5) << "head_dim " << head_dim;
    kg->~KvCache();  // the backend drops this cache's mirror at its next op
  }
}

}  // namespace
}  // namespace ssd
