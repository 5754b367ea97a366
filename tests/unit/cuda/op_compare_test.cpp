// The op-comparison registry: every CudaBackend op (and the device sampling / verification /
// Domino kernels) against the CPU backend or the CPU rule, on awkward shapes, each case with its
// own tolerance (the llama.cpp test-backend-ops idea). Every case needs a GPU and skips with a
// visible message without one; none has run yet (no GPU where this project is built).
//
// Tolerances, as normalised max error max|gpu - cpu| / max|cpu|:
//   matmul      2^-8: the device multiplies BF16-rounded weights (relative error 2^-9 each; the
//               CPU reads the file's own values, or 8-bit activations on its integer path), and
//               sums of cols terms with random signs keep the relative error near that of a term.
//   rmsnorm, rope, swiglu, add, embed: 1e-6 (float rounding and expf; RoPE and embed are exact
//               twins but cos/sin in float64 may differ by an ulp between libm and CUDA).
//   attention   1e-5 (different summation order and exp; the twin test bounds both at 2e-5).
//   whole model 2e-2 on logits (the matmul error through two layers); the device's greedy token
//               must be one the CPU rates within 4e-2 (twice that) of its best.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "kernels/common/row_math.h"
#include "kernels/common/sampling_math.h"
#include "kernels/cuda/kernels.cuh"
#include "runtime/backend/backend.h"
#include "runtime/backend/cuda/cuda_backend.h"
#include "runtime/model/model_file.h"
#include "runtime/model/transformer.h"
#include "runtime/sampling/philox.h"
#include "runtime/sampling/sampler.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tiny_model.h"
#include "tests/unit/cuda/skip_without_gpu.h"
#include "tests/unit/kernels/kernel_test_util.h"

namespace ssd {
namespace {


double nmse_max(const std::vector<float>& got, const std::vector<float>& want) {
  double m = 0, d = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    m = std::max(m, std::abs(static_cast<double>(want[i])));
    d = std::max(d, std::abs(static_cast<double>(got[i]) - want[i]));
  }
  return m > 0 ? d / m : d;
}

struct Backends {
  std::unique_ptr<Backend> cpu = make_cpu_backend(1);
  std::unique_ptr<Backend> gpu = make_cuda_backend(0);
};

TEST(CudaOps, MatmulEveryWeightTypeAndBatchInvariance) {
  SSD_SKIP_WITHOUT_GPU("CPU-vs-CUDA op comparison");
  Backends b;
  std::mt19937 rng(1);
  for (DType t : kernels::test::kAllTypes) {
    std::vector<uint8_t> bytes;
    const int64_t rows = 67, cols = 512;
    const TensorRef ref = kernels::test::random_matrix(t, rows, cols, bytes, rng);
    const auto wc = b.cpu->prepare_weight(ref);
    const auto wg = b.gpu->prepare_weight(ref);
    for (int64_t n : {1, 5, 300}) {  // 300 > invariant_max_tokens: the cuBLAS path
      const auto x = kernels::test::random_floats(n * cols, rng);
      std::vector<float> yc(n * rows), yg(n * rows);
      b.cpu->matmul(wc, x.data(), yc.data(), n);
      b.gpu->matmul(wg, x.data(), yg.data(), n);
      EXPECT_LT(nmse_max(yg, yc), 1.0 / 256) << dtype_traits(t).name << " n " << n;
      if (n == 5) {  // row 3 of a 5-token call is bitwise the 1-token result
        std::vector<float> y1(rows);
        b.gpu->matmul(wg, x.data() + 3 * cols, y1.data(), 1);
        for (int64_t r = 0; r < rows; ++r) ASSERT_EQ(y1[r], yg[3 * rows + r]) << r;
      }
    }
  }
}

TEST(CudaOps, RowOps) {
  SSD_SKIP_WITHOUT_GPU("CPU-vs-CUDA op comparison");
  Backends b;
  std::mt19937 rng(2);
  for (int64_t dim : {1, 80, 576, 1001}) {
    const int64_t rows = 7;
    const auto x = kernels::test::random_floats(rows * dim, rng, 2.0f);
    const auto g = kernels::test::random_floats(dim, rng);
    std::vector<float> yc(rows * dim), yg(rows * dim);
    b.cpu->rmsnorm(x.data(), g.data(), yc.data(), rows, dim, 1e-5f);
    b.gpu->rmsnorm(x.data(), g.data(), yg.data(), rows, dim, 1e-5f);
    EXPECT_LT(nmse_max(yg, yc), 1e-6) << "rmsnorm dim " << dim;
    auto xi = x;  // in place
    b.gpu->rmsnorm(xi.data(), g.data(), xi.data(), rows, dim, 1e-5f);
    EXPECT_LT(nmse_max(xi, yc), 1e-6) << "rmsnorm in place dim " << dim;
    const auto u = kernels::test::random_floats(rows * dim, rng);
    b.cpu->swiglu(x.data(), u.data(), yc.data(), rows * dim);
    b.gpu->swiglu(x.data(), u.data(), yg.data(), rows * dim);
    EXPECT_LT(nmse_max(yg, yc), 1e-6) << "swiglu " << dim;
    auto ac = x, ag = x;
    b.cpu->add_bias(ac.data(), g.data(), rows, dim);
    b.gpu->add_bias(ag.data(), g.data(), rows, dim);
    EXPECT_EQ(ag, ac) << "add_bias";
    b.cpu->add(ac.data(), u.data(), rows * dim);
    b.gpu->add(ag.data(), u.data(), rows * dim);
    EXPECT_EQ(ag, ac) << "add";
  }
  for (int64_t head_dim : {64, 128, 80}) {
    for (auto layout : {RopeLayout::NeoX, RopeLayout::Interleaved}) {
      const int64_t n = 5, heads = 3, rot = head_dim;
      std::vector<float> inv(rot / 2);
      for (int64_t i = 0; i < rot / 2; ++i) inv[i] = std::pow(10000.0f, -2.0f * i / rot);
      const std::vector<int32_t> pos = {0, 1, 7, 500, 4095};
      auto xc = kernels::test::random_floats(n * heads * head_dim, rng), xg = xc;
      b.cpu->rope(xc.data(), n, heads, head_dim, rot, pos.data(), inv.data(), layout);
      b.gpu->rope(xg.data(), n, heads, head_dim, rot, pos.data(), inv.data(), layout);
      EXPECT_LT(nmse_max(xg, xc), 1e-6) << "rope " << head_dim;
    }
  }
}

TEST(CudaOps, EmbedEveryType) {
  SSD_SKIP_WITHOUT_GPU("CPU-vs-CUDA op comparison");
  Backends b;
  std::mt19937 rng(3);
  for (DType t : kernels::test::kAllTypes) {
    std::vector<uint8_t> bytes;
    const TensorRef ref = kernels::test::random_matrix(t, 37, 256, bytes, rng);
    const auto tc = b.cpu->prepare_weight(ref);
    const auto tg = b.gpu->prepare_weight(ref);
    const std::vector<int32_t> toks = {0, 36, 5, 5, 17};
    std::vector<float> yc(5 * 256), yg(5 * 256);
    b.cpu->embed(tc, toks.data(), 5, yc.data());
    b.gpu->embed(tg, toks.data(), 5, yg.data());
    EXPECT_EQ(yg, yc) << dtype_traits(t).name;  // the shared decoder: bit for bit
  }
}

// Attention over the paged cache with prefix + list masks, GQA and kv_head_of, after a fork
// (copy on write) and a compaction, so the device mirror's page bookkeeping is exercised too.
TEST(CudaOps, AttentionWithMasksForksAndCompaction) {
  SSD_SKIP_WITHOUT_GPU("CPU-vs-CUDA op comparison");
  Backends b;
  std::mt19937 rng(4);
  for (int64_t head_dim : {64, 128, 80}) {
    const int64_t kv_heads = 2, heads = 4, layers = 2;
    KvCacheConfig cfg{layers, kv_heads, head_dim, 16, 256};
    KvCache kc(cfg), kg(cfg);
    const int64_t len = 37;
    for (KvCache* kv : {&kc, &kg}) {
      const SeqId s = kv->create();
      kv->grow(s, len);
    }
    const int64_t row = kv_heads * head_dim;
    std::vector<SeqId> seqs(len, 0);
    std::vector<int64_t> pos(len);
    for (int64_t i = 0; i < len; ++i) pos[i] = i;
    for (int64_t l = 0; l < layers; ++l) {
      const auto k = kernels::test::random_floats(len * row, rng);
      const auto v = kernels::test::random_floats(len * row, rng);
      b.cpu->store_kv(kc, l, seqs.data(), pos.data(), k.data(), v.data(), len);
      b.gpu->store_kv(kg, l, seqs.data(), pos.data(), k.data(), v.data(), len);
    }
    // A branch: fork, overwrite two positions in the fork (copy on write), compact the original.
    const SeqId fc = kc.fork(0), fg = kg.fork(0);
    const auto k2 = kernels::test::random_floats(2 * row, rng);
    const std::vector<int64_t> p2 = {33, 36};
    for (int64_t l = 0; l < layers; ++l) {
      const std::vector<SeqId> fs = {fc, fc};
      b.cpu->store_kv(kc, l, fs.data(), p2.data(), k2.data(), k2.data(), 2);
      const std::vector<SeqId> gs = {fg, fg};
      b.gpu->store_kv(kg, l, gs.data(), p2.data(), k2.data(), k2.data(), 2);
    }
    const std::vector<int32_t> keep = {0, 2, 3};
    kc.compact(0, 32, keep);
    kg.compact(0, 32, keep);
    // Queries: seq 0 (length 35) with a prefix and a list; the fork with a tree-like list.
    const std::vector<SeqId> qs = {0, 0, fc, fc};
    const std::vector<int64_t> prefix = {30, 0, 33, 20};
    const std::vector<int64_t> vis = {31, 33, 34, 1, 2, 3, 30, 34, 36, 21, 36};
    const std::vector<int64_t> off = {0, 3, 6, 9, 11};
    const std::vector<int32_t> head_of = {1, 0, 0, 1};
    for (bool custom : {false, true}) {
      const auto q = kernels::test::random_floats(4 * heads * head_dim, rng);
      std::vector<float> oc(q.size()), og(q.size());
      for (int i = 0; i < 2; ++i) {
        AttentionCall c;
        c.q = q.data();
        c.out = i == 0 ? oc.data() : og.data();
        c.n = 4;
        c.n_heads = heads;
        c.n_kv_heads = kv_heads;
        c.head_dim = head_dim;
        c.kv_head_of = custom ? head_of.data() : nullptr;
        c.layer = 1;
        c.scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
        c.cache = i == 0 ? &kc : &kg;
        c.seqs = qs.data();
        c.prefix_len = prefix.data();
        c.visible = vis.data();
        c.visible_offsets = off.data();
        (i == 0 ? b.cpu : b.gpu)->attention(c);
      }
      EXPECT_LT(nmse_max(og, oc), 1e-5) << "head_dim " << head_dim << " custom " << custom;
    }
  }
}

TEST(CudaOps, LongContextAttentionSplitAcrossChunks) {
  // 700 positions: six split-K chunks (attention.cu). A decode-style row (all in the prefix) and
  // a verification-style row over the same positions (prefix 500 + a list) must give the same
  // bits on the device, and both the CPU backend's values within attention's 1e-5.
  SSD_SKIP_WITHOUT_GPU("CPU-vs-CUDA op comparison");
  Backends b;
  std::mt19937 rng(5);
  const int64_t head_dim = 64, kv_heads = 3, heads = 9, len = 700;
  KvCacheConfig cfg{1, kv_heads, head_dim, 16, 1024};
  KvCache kc(cfg), kg(cfg);
  for (KvCache* kv : {&kc, &kg}) kv->grow(kv->create(), len);
  const int64_t row = kv_heads * head_dim;
  std::vector<SeqId> seqs(len, 0);
  std::vector<int64_t> pos(len);
  for (int64_t i = 0; i < len; ++i) pos[i] = i;
  const auto k = kernels::test::random_floats(len * row, rng);
  const auto v = kernels::test::random_floats(len * row, rng);
  b.cpu->store_kv(kc, 0, seqs.data(), pos.data(), k.data(), v.data(), len);
  b.gpu->store_kv(kg, 0, seqs.data(), pos.data(), k.data(), v.data(), len);
  std::vector<int64_t> vis;
  for (int64_t p = 500; p < len; ++p) vis.push_back(p);
  const std::vector<SeqId> qs = {0, 0};
  const std::vector<int64_t> prefix = {len, 500};
  const std::vector<int64_t> off = {0, 0, static_cast<int64_t>(vis.size())};
  auto q = kernels::test::random_floats(heads * head_dim, rng, 2.0f);
  q.insert(q.end(), q.begin(), q.end());  // both rows ask the same question
  std::vector<float> oc(q.size()), og(q.size());
  for (int i = 0; i < 2; ++i) {
    AttentionCall c;
    c.q = q.data();
    c.out = i == 0 ? oc.data() : og.data();
    c.n = 2;
    c.n_heads = heads;
    c.n_kv_heads = kv_heads;
    c.head_dim = head_dim;
    c.layer = 0;
    c.scale = 0.125f;
    c.cache = i == 0 ? &kc : &kg;
    c.seqs = qs.data();
    c.prefix_len = prefix.data();
    c.visible = vis.data();
    c.visible_offsets = off.data();
    (i == 0 ? b.cpu : b.gpu)->attention(c);
  }
  EXPECT_LT(nmse_max(og, oc), 1e-5);
  const size_t half = og.size() / 2;
  EXPECT_TRUE(std::equal(og.begin(), og.begin() + half, og.begin() + half))
      << "the verification-style row differs from the decode-style row on the device";
}

template <class T>
struct Dev {
  T* p = nullptr;
  explicit Dev(size_t n) {
    EXPECT_EQ(cudaMalloc(&p, std::max<size_t>(n, 1) * sizeof(T)), cudaSuccess);
  }
  ~Dev() { cudaFree(p); }
  void put(const std::vector<T>& v) {
    cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice);
  }
  std::vector<T> get(size_t n) {
    std::vector<T> v(n);
    cudaMemcpy(v.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost);
    return v;
  }
};

TEST(CudaOps, SamplingAndVerificationKernels) {
  SSD_SKIP_WITHOUT_GPU("CPU-vs-CUDA op comparison");
  std::mt19937 rng(5);
  const int32_t vocab = 49152;
  const int64_t rows = 5;
  auto logits = kernels::test::random_floats(rows * vocab, rng, 3.0f);
  logits[2 * vocab + 7] = logits[2 * vocab + 9] = 100.0f;  // a tie: the lower index wins
  logits[3 * vocab + 0] = NAN;
  Dev<float> dl(logits.size());
  dl.put(logits);
  Dev<int32_t> da(rows);
  cuda::launch_argmax_rows(dl.p, rows, vocab, da.p, nullptr);
  const auto am = da.get(rows);
  for (int64_t r = 0; r < rows; ++r) EXPECT_EQ(am[r], argmax(logits.data() + r * vocab, vocab));

  Dev<double> du(1000);
  cuda::launch_philox_uniforms(42, 7, 100, kLaneResidual, 1000, du.p, nullptr);
  const auto u = du.get(1000);
  for (uint32_t i = 0; i < 1000; ++i)
    ASSERT_EQ(u[i], philox_uniform(42, 7, 100 + i, kLaneResidual));

  const std::vector<int32_t> draft = {am[0], am[1], 3, 4};
  Dev<int32_t> dd(4), dout(5), dn(1);
  dd.put(draft);
  cuda::launch_verify_greedy_chain(dd.p, da.p, 4, dout.p, dn.p, nullptr);
  const int32_t n = dn.get(1)[0];
  EXPECT_EQ(n, am[2] == 3 ? (am[3] == 4 ? 5 : 4) : 3);
  const auto out = dout.get(static_cast<size_t>(n));
  EXPECT_EQ(out[0], am[0]);
  EXPECT_EQ(out[n - 1], am[n - 1]);
}

// The Domino head's fused pieces: the GRU update and base + correction + argmax over a block.
TEST(CudaOps, DominoLoopKernels) {
  SSD_SKIP_WITHOUT_GPU("CPU-vs-CUDA op comparison");
  std::mt19937 rng(6);
  const int64_t n = 3, g = 96;
  const int32_t vocab = 1000;
  const auto gi = kernels::test::random_floats(n * 3 * g, rng);
  const auto gh = kernels::test::random_floats(n * 3 * g, rng);
  auto s = kernels::test::random_floats(n * g, rng, 0.5f);
  std::vector<float> want(n * g);
  for (int64_t j = 0; j < n; ++j)
    for (int64_t u = 0; u < g; ++u) {
      const float* xi = gi.data() + j * 3 * g;
      const float* hh = gh.data() + j * 3 * g;
      want[j * g + u] = kernels::hd::gru_unit(xi[u], xi[g + u], xi[2 * g + u], hh[u], hh[g + u],
                                              hh[2 * g + u], s[j * g + u]);
    }
  Dev<float> dgi(gi.size()), dgh(gh.size()), ds(s.size());
  dgi.put(gi);
  dgh.put(gh);
  ds.put(s);
  cuda::launch_gru_update(dgi.p, dgh.p, ds.p, n, g, nullptr);
  EXPECT_LT(nmse_max(ds.get(s.size()), want), 1e-6);  // expf / tanhf vs libm: a few ulp

  const auto base = kernels::test::random_floats(n * vocab, rng);
  const auto corr = kernels::test::random_floats(n * vocab, rng, 0.1f);
  Dev<float> db(base.size()), dc(corr.size()), dlog(base.size());
  Dev<int32_t> dnext(n);
  db.put(base);
  dc.put(corr);
  cuda::launch_add_argmax(db.p, dc.p, dlog.p, n, vocab, dnext.p, nullptr);
  const auto next = dnext.get(n);
  for (int64_t j = 0; j < n; ++j) {
    std::vector<float> row(vocab);
    for (int32_t i = 0; i < vocab; ++i) row[i] = base[j * vocab + i] + corr[j * vocab + i];
    EXPECT_EQ(next[j], argmax(row.data(), vocab));
  }
}

// A whole tiny model on both backends: the logits of a prefill and of an 8-step greedy decode
// (both backends fed the CPU's tokens, so they stay on the same path). Random tiny models have
// nearly flat logits, so the greedy check is that the CUDA backend's argmax is a token the CPU
// also rates within the logit tolerance of its own best (exact equality could fail on a
// near-tie that BF16 weights legitimately flip).
TEST(CudaOps, WholeModelGreedyForward) {
  SSD_SKIP_WITHOUT_GPU("CPU-vs-CUDA op comparison");
  test::TempDir tmp;
  for (DType t : {DType::F32, DType::Q8_0, DType::Q4_K}) {
    const std::string name = std::string(dtype_traits(t).name) + ".gguf";
    const std::string path = test::write_tiny_gguf(test::tiny_spec(Arch::Llama, t), tmp.file(name));
    const ModelFile file = ModelFile::open(path);
    Backends b;
    Transformer mc(file, *b.cpu), mg(file, *b.gpu);
    KvCache kc(mc.kv_config(128)), kg(mg.kv_config(128));
    const SeqId sc = kc.create(), sg = kg.create();
    const std::vector<int32_t> prompt = {1, 17, 200, 3, 99, 45};
    ForwardResult rc = mc.forward(Batch::sequence(sc, prompt, 0, true), kc);
    ForwardResult rg = mg.forward(Batch::sequence(sg, prompt, 0, true), kg);
    EXPECT_LT(nmse_max(rg.logits, rc.logits), 2e-2) << dtype_traits(t).name;
    const auto vocab = static_cast<int32_t>(rc.vocab);
    const float* last_c = rc.logits.data() + 5 * vocab;
    const float* last_g = rg.logits.data() + 5 * vocab;
    for (int32_t step = 0; step < 8; ++step) {
      const int32_t tc = argmax(last_c, vocab), tg = argmax(last_g, vocab);
      float amax = 0;
      for (int32_t i = 0; i < vocab; ++i) amax = std::max(amax, std::abs(last_c[i]));
      EXPECT_GE(last_c[tg], last_c[tc] - 4e-2f * amax) << dtype_traits(t).name << " " << step;
      const int32_t p = static_cast<int32_t>(prompt.size()) + step;
      rc = mc.forward(Batch::sequence(sc, {tc}, p), kc);
      rg = mg.forward(Batch::sequence(sg, {tc}, p), kg);
      EXPECT_LT(nmse_max(rg.logits, rc.logits), 2e-2) << dtype_traits(t).name << " step " << step;
      last_c = rc.logits.data();
      last_g = rg.logits.data();
    }
  }
}

// Greedy exactness on the device: a 4-token verification forward gives, row for row, the same
// logits bits as 4 one-token decodes (what makes greedy SD equal AR on this backend).
TEST(CudaOps, VerificationForwardReproducesDecodesBitForBit) {
  SSD_SKIP_WITHOUT_GPU("CPU-vs-CUDA op comparison");
  test::TempDir tmp;
  const std::string path =
      test::write_tiny_gguf(test::tiny_spec(Arch::Llama, DType::Q4_K), tmp.file("m.gguf"));
  const ModelFile file = ModelFile::open(path);
  auto gpu = make_cuda_backend(0);
  Transformer m(file, *gpu);
  KvCache kv(m.kv_config(128));
  const SeqId a = kv.create();
  m.forward(Batch::sequence(a, {1, 17, 200, 3}, 0), kv);
  const SeqId b = kv.fork(a);
  const std::vector<int32_t> draft = {99, 45, 7, 120};
  const ForwardResult block = m.forward(Batch::sequence(b, draft, 4, true), kv);
  for (int32_t i = 0; i < 4; ++i) {
    const ForwardResult one = m.forward(Batch::sequence(a, {draft[i]}, 4 + i), kv);
    for (int64_t v = 0; v < one.vocab; ++v)
      ASSERT_EQ(one.logits[v], block.logits[i * block.vocab + v]) << "row " << i << " id " << v;
  }
}

}  // namespace
}  // namespace ssd
