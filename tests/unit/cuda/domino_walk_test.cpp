// The fused Domino walk (kernels/cuda/domino_walk.cu through CudaBackend::domino_walk) against
// its CPU twin (tests/support/domino_twin.h, itself tested against the CPU head in
// tests/unit/spec/domino_head_twin_test.cpp), on awkward sizes: d 29, GRU 7, rank 5, Vd 37 (a
// draft vocabulary of 37 ids out of 50, and the identity case V = Vd = 37), three chains of
// lengths 5, 1 and 3 in one launch, head on and off, with BF16, F16 and F32 head matrices (the
// walk multiplies the stored values). Then the drafter's two paths on one CUDA
// backend: DominoHead::walk_fused against DominoHead::walk on the same rows, predict_top included;
// and a backbone pass replayed as a CUDA graph against the eager pass, bit for bit.
// Every case needs a GPU and skips visibly without one; none has run yet (no GPU here).
//
// Tolerances: device vs twin, final logits 1e-5 normalised max error (the same weights, the same
// dot-product order, fused multiply-adds on both; only expf / tanhf differ from libm, by a few
// ulp, and that reaches the logits through the GRU state); tokens identical, and the test asserts
// the twin's top-two gap is > 1e-3 at every position so that equality is a real requirement.
// fused vs op-by-op on the device: the same matmul kernel order; the op-by-op GRU runs on the
// host (std::exp), so again 1e-5 and identical tokens. Head off: exactly the base rows.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kernels/common/half_math.h"
#include "runtime/backend/backend.h"
#include "runtime/backend/cuda/cuda_backend.h"
#include "runtime/drafters/domino/domino_backbone.h"
#include "runtime/drafters/domino/domino_head.h"
#include "runtime/model/model_file.h"
#include "runtime/model/transformer.h"
#include "tests/support/domino_twin.h"
#include "tests/support/domino_writer.h"
#include "tests/support/tensor_data.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tiny_model.h"
#include "tests/unit/cuda/skip_without_gpu.h"

namespace ssd {
namespace {

double nmse_max(const float* got, const float* want, size_t n) {
  double m = 0, d = 0;
  for (size_t i = 0; i < n; ++i) {
    m = std::max(m, std::abs(static_cast<double>(want[i])));
    d = std::max(d, std::abs(static_cast<double>(got[i]) - want[i]));
  }
  return m > 0 ? d / m : d;
}

double top2_gap(const float* row, int64_t n) {
  std::vector<float> s(row, row + n);
  std::partial_sort(s.begin(), s.begin() + 2, s.end(), std::greater<>());
  return s[0] - s[1];
}

// A head matrix [rows, cols] of random values stored as `type` (F32, F16 or BF16); `values`
// gets them decoded, as floats (exact for all three types).
struct StoredMatrix {
  std::vector<float> f32;
  std::vector<uint16_t> half;  // F16 or BF16 bits
  std::vector<float> values;
  TensorRef ref;
  StoredMatrix(int64_t rows, int64_t cols, float sigma, DType type, std::mt19937& rng) {
    namespace hd = kernels::hd;
    std::normal_distribution<float> nd(0.0f, sigma);
    for (int64_t i = 0; i < rows * cols; ++i) {
      const float x = nd(rng);
      if (type == DType::F32) {
        f32.push_back(x);
        values.push_back(x);
      } else if (type == DType::F16) {
        half.push_back(hd::fp32_to_fp16(x));
        values.push_back(hd::fp16_to_fp32(half.back()));
      } else {
        half.push_back(hd::fp32_to_bf16(x));
        values.push_back(hd::bf16_to_fp32(half.back()));
      }
    }
    ref = test::matrix_ref(type, type == DType::F32 ? static_cast<const void*>(f32.data())
                                                    : static_cast<const void*>(half.data()),
                           rows, cols);
  }
};

void compare_walk_with_twin(bool draft_vocab, bool use_head, DType type = DType::BF16) {
  const int64_t d = 29, g = 7, r = 5, vd = 37, v = draft_vocab ? 50 : 37;
  std::mt19937 rng(draft_vocab ? 21 : 12);
  std::normal_distribution<float> n01(0.0f, 1.0f);
  test::DominoTwinHead twin;
  twin.d = d;
  twin.g = g;
  twin.r = r;
  twin.vd = vd;
  std::vector<float> embd(v * d);  // F32 table, decoded exactly on the device
  for (float& x : embd) x = n01(rng);
  twin.embd = embd;
  StoredMatrix w_ih(3 * g, d, 1.0f / std::sqrt(29.0f), type, rng), w_hh(3 * g, g, 0.4f, type, rng),
      w1(r, d + g, 0.2f, type, rng), w2(vd, r, 0.8f, type, rng);
  twin.w_ih = w_ih.values;
  twin.w_hh = w_hh.values;
  twin.w1 = w1.values;
  twin.w2 = w2.values;
  for (int64_t i = 0; i < 3 * g; ++i) {
    twin.b_ih.push_back(0.1f * n01(rng));
    twin.b_hh.push_back(0.1f * n01(rng));
  }
  if (draft_vocab)
    for (int32_t t = 0; t < v && static_cast<int64_t>(twin.vocab_ids.size()) < vd; ++t)
      if (t % 4 != 1) twin.vocab_ids.push_back(t);
  ASSERT_EQ(static_cast<int64_t>(draft_vocab ? twin.vocab_ids.size() : vd), vd);
  const std::vector<int64_t> first = {0, 5, 6, 9};
  const std::vector<int32_t> anchors = {3, static_cast<int32_t>(v - 1), 0};
  const int64_t rows = first.back();
  std::vector<float> base(rows * vd), hidden(rows * d);
  for (float& x : base) x = 2.0f * n01(rng);
  for (float& x : hidden) x = n01(rng);
  std::vector<float> want = base;
  const std::vector<int32_t> want_tokens =
      test::domino_twin_walk(twin, want.data(), hidden.data(), first, anchors, use_head);
  for (int64_t row = 0; row < rows; ++row)
    ASSERT_GT(top2_gap(want.data() + row * vd, vd), 1e-3) << "near-tie in the twin, row " << row;

  SSD_SKIP_WITHOUT_GPU("fused Domino walk vs its CPU twin");
  std::unique_ptr<Backend> gpu = make_cuda_backend(0);
  ASSERT_TRUE(gpu->has_domino_walk());
  const Weight we = gpu->prepare_weight(test::matrix_ref(DType::F32, embd.data(), v, d));
  const Weight wih = gpu->prepare_weight(w_ih.ref);
  const Weight whh = gpu->prepare_weight(w_hh.ref);
  const Weight wa = gpu->prepare_weight(w1.ref);
  const Weight wb = gpu->prepare_weight(w2.ref);
  BackendBuffer dlog = gpu->allocate(base.size() * sizeof(float));
  BackendBuffer dhid = gpu->allocate(hidden.size() * sizeof(float));
  gpu->upload(dlog.data(), base.data(), base.size() * sizeof(float));
  gpu->upload(dhid.data(), hidden.data(), hidden.size() * sizeof(float));
  DominoWalkCall call;
  call.token_embd = &we;
  call.w_ih = &wih;
  call.w_hh = &whh;
  call.w1 = &wa;
  call.w2 = &wb;
  call.b_ih = twin.b_ih.data();  // host inputs: staged by the backend
  call.b_hh = twin.b_hh.data();
  call.vocab_ids = draft_vocab ? twin.vocab_ids.data() : nullptr;
  call.d = d;
  call.g = g;
  call.r = r;
  call.vd = vd;
  call.use_head = use_head;
  call.logits = dlog.data();
  call.hidden = dhid.data();
  call.first = first.data();
  call.anchors = anchors.data();
  call.chains = 3;
  std::vector<int32_t> tokens(rows, -7);
  call.tokens = tokens.data();
  gpu->domino_walk(call);
  std::vector<float> got(base.size());
  gpu->download(got.data(), dlog.data(), got.size() * sizeof(float));
  EXPECT_EQ(tokens, want_tokens);
  for (int64_t row = 0; row < rows; ++row) {
    const float* gr = got.data() + row * vd;
    const float* wr = want.data() + row * vd;
    if (use_head) EXPECT_LT(nmse_max(gr, wr, vd), 1e-5) << "row " << row;
    else EXPECT_TRUE(std::equal(gr, gr + vd, wr)) << "row " << row;
  }
}

TEST(CudaDominoWalk, FusedWalkEqualsTwinWholeVocabulary) { compare_walk_with_twin(false, true); }
TEST(CudaDominoWalk, FusedWalkEqualsTwinDraftVocabulary) { compare_walk_with_twin(true, true); }
// The walk multiplies the head in its stored type: F32 and F16 heads (values BF16 cannot hold)
// give the twin's tokens and logits too.
TEST(CudaDominoWalk, FusedWalkKeepsAnF32OrF16HeadsValues) {
  compare_walk_with_twin(true, true, DType::F32);
  compare_walk_with_twin(false, true, DType::F16);
}
TEST(CudaDominoWalk, FusedWalkHeadOffIsTheBaseArgmax) {
  compare_walk_with_twin(false, false);
  compare_walk_with_twin(true, false);
}

// The Domino head's two paths on one GPU need the same setup: a tiny target on GPU 0, a BF16
// drafter over an 87-id draft vocabulary, 10 context rows of random features (seeded), one
// backbone pass over `blocks` (their seq is filled in) and a chain per block over its rows.
struct DeviceHeadRun {
  test::TempDir tmp;
  ModelFile file;
  std::unique_ptr<Backend> gpu;
  Transformer target;
  DominoCheckpoint ck;
  DominoBackbone bb;
  DominoHead head;
  KvCache kv;
  std::vector<DominoBackbone::Block> blocks;
  DominoBackbone::Result res;
  std::vector<DominoChain> chains;

  static test::DominoSpec spec(DType type) {
    test::DominoSpec sp = test::tiny_domino_spec();
    sp.type = type;
    for (int32_t t = 2; t < 261; t += 3) sp.cfg.draft_vocab.push_back(t);
    return sp;
  }
  DeviceHeadRun(uint32_t seed, std::vector<DominoBackbone::Block> bl, DType type = DType::BF16)
      : file(ModelFile::open(test::write_tiny_gguf(test::tiny_spec(Arch::Llama, DType::F32),
                                                   tmp.file("t.gguf")))),
        gpu(make_cuda_backend(0)),
        target(file, *gpu),
        ck(DominoCheckpoint::open(test::write_domino(spec(type), tmp.file("d.safetensors")))),
        bb(ck, target),
        head(ck, target),
        kv(bb.kv_config(256)),
        blocks(std::move(bl)) {
    const DominoConfig& cfg = ck.config();
    const SeqId s = kv.create();
    std::mt19937 rng(seed);
    std::normal_distribution<float> n01(0.0f, 1.0f);
    std::vector<float> features(10 * cfg.feature_dim());
    for (float& x : features) x = n01(rng);
    bb.append_context(kv, s, 0, features);
    for (DominoBackbone::Block& b : blocks) b.seq = s;
    res = bb.forward(kv, blocks);  // downloaded rows too
    chains.resize(blocks.size());
    for (size_t c = 0; c < blocks.size(); ++c) {
      chains[c].base = res.logits.data() + res.offset[c] * cfg.draft_vocab_size();
      chains[c].hidden = res.hidden.data() + res.offset[c] * cfg.target_dim;
      chains[c].anchor = blocks[c].known.back();
      chains[c].k = blocks[c].n_out;
    }
  }
};

// The Domino head's two paths on one CUDA backend, from the same backbone rows: walk_fused (one
// launch, rows in device memory) and walk (op by op from host rows), with predict_top asked on
// one chain (its predicted lists come from the downloaded final rows).
// A BF16 and an F32 checkpoint: both paths multiply the stored values.
TEST(CudaDominoWalk, HeadFusedPathEqualsOpByOpPathOnTheDevice) {
  SSD_SKIP_WITHOUT_GPU("DominoHead::walk_fused vs DominoHead::walk on the CUDA backend");
  for (const DType type : {DType::BF16, DType::F32}) {
    SCOPED_TRACE(std::string(dtype_name(type)));
    DeviceHeadRun run(3, {{-1, 10, {40}, 7}, {-1, 9, {7, 8}, 3}}, type);
    ASSERT_TRUE(run.head.fused());
    DraftRequest with_top;
    with_top.predict_top = 3;
    run.chains[1].request = &with_top;
    std::vector<std::vector<float>> want_final, got_final;
    const auto want = run.head.walk(run.chains, true, &want_final);
    const auto got = run.head.walk_fused(run.res.dev_logits, run.res.dev_hidden, run.res.offset,
                                         run.chains, true, &got_final);
    for (size_t c = 0; c < 2; ++c) {
      EXPECT_EQ(got[c].tokens, want[c].tokens) << "chain " << c;
      EXPECT_EQ(got[c].parents, want[c].parents) << "chain " << c;
      ASSERT_EQ(got[c].predicted.size(), want[c].predicted.size());
      for (size_t i = 0; i < got[c].predicted.size(); ++i) {
        ASSERT_EQ(got[c].predicted[i].size(), want[c].predicted[i].size());
        for (size_t j = 0; j < got[c].predicted[i].size(); ++j)
          EXPECT_EQ(got[c].predicted[i].tokens[j].id, want[c].predicted[i].tokens[j].id);
      }
      std::vector<float> a, b;  // finite entries (the draft ids; -inf elsewhere on both)
      for (size_t i = 0; i < want_final[c].size(); ++i)
        if (std::isfinite(want_final[c][i])) {
          a.push_back(got_final[c][i]);
          b.push_back(want_final[c][i]);
        }
      EXPECT_LT(nmse_max(a.data(), b.data(), a.size()), 1e-5) << "chain " << c;
    }
  }
}

// The sampled walk on the device (runtime/backend/cuda/domino_sampled_walk.h: a launch per position,
// the device sampler's process and draw between) against the host's op-by-op walk on the same
// backbone rows: a top-p chain, a top-k chain and a greedy chain in one walk, over a draft
// vocabulary. Tolerances: the final rows differ in summation order (1e-5, as above), so each
// q entry's probability within 1e-4 absolute and the same ids in the same order; the tokens
// drawn with the same Philox uniforms are then equal (a uniform would have to fall within 1e-4
// of a CDF boundary to differ, which the fixed seeds here do not).
TEST(CudaDominoWalk, SampledFusedWalkDrawsAsTheHostWalk) {
  SSD_SKIP_WITHOUT_GPU("sampled DominoHead::walk_fused vs DominoHead::walk on the CUDA backend");
  DeviceHeadRun run(5, {{-1, 10, {40}, 6}, {-1, 9, {7, 8}, 4}, {-1, 8, {3}, 3}});
  std::vector<DominoChain>& chains = run.chains;
  for (size_t c = 0; c < 3; ++c) {
    chains[c].stream = 11 + c;
    chains[c].step = 40;
  }
  chains[0].sampler = SamplerConfig{.temperature = 0.8f, .top_p = 0.9f, .seed = 7};
  chains[1].sampler = SamplerConfig{.temperature = 1.0f, .top_k = 5, .seed = 9};
  for (const DominoChain& c : chains)
    ASSERT_TRUE(DominoHead::walks_fused(c.sampler, c.request, c.k));
  const auto want = run.head.walk(chains, true);
  const auto got =
      run.head.walk_fused(run.res.dev_logits, run.res.dev_hidden, run.res.offset, chains, true);
  for (size_t c = 0; c < 3; ++c) {
    SCOPED_TRACE(testing::Message() << "chain " << c);
    EXPECT_EQ(got[c].tokens, want[c].tokens);
    EXPECT_EQ(got[c].parents, want[c].parents);
    ASSERT_EQ(got[c].q.size(), want[c].q.size());
    for (size_t i = 0; i < got[c].q.size(); ++i) {
      ASSERT_EQ(got[c].q[i].size(), want[c].q[i].size()) << "position " << i + 1;
      for (size_t j = 0; j < got[c].q[i].size(); ++j) {
        EXPECT_EQ(got[c].q[i].tokens[j].id, want[c].q[i].tokens[j].id);
        EXPECT_NEAR(got[c].q[i].tokens[j].prob, want[c].q[i].tokens[j].prob, 1e-4);
      }
    }
  }
}

// A backbone pass replayed as a CUDA graph (measured, captured, then replayed: the same shape
// three times, with context_inject so the staged inject rows are covered) gives the eager
// backend's hidden states and base logits bit for bit, each time.
TEST(CudaDominoWalk, GraphedBackbonePassEqualsEagerBitForBit) {
  SSD_SKIP_WITHOUT_GPU("a Domino backbone pass replayed as a CUDA graph vs eager");
  test::TempDir tmp;
  ModelFile file =
      ModelFile::open(test::write_tiny_gguf(test::tiny_spec(Arch::Llama, DType::F32),
                                            tmp.file("t.gguf")));
  test::DominoSpec spec = test::tiny_domino_spec();
  spec.cfg.context_inject = true;
  const DominoCheckpoint ck = DominoCheckpoint::open(test::write_domino(spec, tmp.file("d.safetensors")));
  const DominoConfig& cfg = ck.config();
  std::mt19937 rng(5);
  std::normal_distribution<float> n01(0.0f, 1.0f);
  std::vector<float> features(10 * cfg.feature_dim());
  for (float& x : features) x = n01(rng);
  struct Run {
    Run(const ModelFile& f, const DominoCheckpoint& ck, const CudaBackendOptions& o,
        const std::vector<float>& feats)
        : be(make_cuda_backend(o)), target(f, *be), bb(ck, target), kv(bb.kv_config(256)),
          seq(kv.create()) {
      bb.append_context(kv, seq, 0, feats, &inject);
    }
    std::unique_ptr<Backend> be;
    Transformer target;
    DominoBackbone bb;
    KvCache kv;
    SeqId seq;
    std::vector<float> inject;
    DominoBackbone::Result pass() {
      std::vector<DominoBackbone::Block> blocks = {{seq, 10, {40}, 7}, {seq, 9, {7, 8}, 3}};
      blocks[0].inject = inject.data() + 9 * 256;
      blocks[1].inject = inject.data() + 8 * 256;
      return bb.forward(kv, blocks);
    }
  };
  Run graphed(file, ck, CudaBackendOptions{.device = 0, .graphs = true, .graph_sizes = {18}},
              features);
  Run eager(file, ck, CudaBackendOptions{.device = 0, .graphs = false}, features);
  for (int rep = 0; rep < 3; ++rep) {
    const auto g = graphed.pass(), e = eager.pass();
    EXPECT_EQ(g.hidden, e.hidden) << "pass " << rep;
    EXPECT_EQ(g.logits, e.logits) << "pass " << rep;
  }
}

}  // namespace
}  // namespace ssd
