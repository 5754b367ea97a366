// The engine against a float64 reference forward (tests/support/reference_forward), on tiny
// random models written in every supported weight type and architecture, plus the properties the
// speculative modes rely on: incremental decode == one batched prefill, a tree-masked batch ==
// its branches run separately, several sequences in one batch == one at a time, and a failed
// forward leaves the cache as it was.
//
// Tolerances (relative = max |a - b| / max |b| over all logits of the compared rows):
//   engine vs float64 reference on the same stored weights: 1e-4 for F32, F16 and BF16 weights
//     (the only difference is float32 activations and accumulation order); 4e-2 for the
//     block-quantized types, whose matmuls take 8-bit activations (kernels/cpu/act_q8.h: one
//     scale dx = amax / 127 per 32 values, rounding error uniform in +-dx/2). For roughly
//     Gaussian activations amax is ~2.5 sigma over 32 values, so a matmul output carries a
//     relative RMS error of about 2.5 / 127 / sqrt(12) = 0.6%; a tiny model's logits pass through
//     about 8 quantized matmuls in series (per layer: the v/o and gate/up/down chains; then the
//     LM head), whose independent errors add to ~1.7% RMS, and rel_err (max error over max
//     |logit|) is of the same size. Measured when written: 0.9e-2 .. 1.95e-2 over the 7
//     quantized cases and all positions; bound 2x the largest. The integer kernels themselves are
//     checked bit for bit against their twin in tests/unit/kernels/packed_matmul_test.cpp;
//   batched vs incremental, tree vs separate, multi-sequence vs single: 2e-5 (same arithmetic,
//     different grouping of the float32 sums);
//   quantized vs the F32 model of the same values (quantization error), per type below.
#include <gtest/gtest.h>

#include <cmath>

#include "runtime/backend/backend.h"
#include "runtime/core/error.h"
#include "runtime/model/transformer.h"
#include "tests/support/rel_err.h"
#include "tests/support/reference_forward.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tiny_model.h"

namespace ssd {
namespace {

using test::TempDir;

const std::vector<int32_t> kPrompt = {5, 77, 258, 1, 140, 33, 200, 9, 101};

using test::rel_err;

struct Engine {
  ModelFile file;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Transformer> model;
  std::unique_ptr<KvCache> kv;
  explicit Engine(const std::string& path, int threads = 2)
      : file(ModelFile::open(path)), backend(make_cpu_backend(threads)) {
    model = std::make_unique<Transformer>(file, *backend);
    kv = std::make_unique<KvCache>(model->kv_config(1024));
  }
  int64_t vocab() const { return file.config().vocab; }
};

struct Case {
  Arch arch;
  DType type;
};

std::string case_name(const testing::TestParamInfo<Case>& p) {
  return std::string(arch_name(p.param.arch)) + "_" + std::string(dtype_name(p.param.type));
}

class EngineVsReference : public testing::TestWithParam<Case> {};

TEST_P(EngineVsReference, PrefillLogitsMatchFloat64Reference) {
  TempDir tmp;
  const auto spec = test::tiny_spec(GetParam().arch, GetParam().type);
  Engine e(test::write_tiny_gguf(spec, tmp.file("m.gguf")));
  const auto ref = test::reference_logits(e.file, kPrompt);
  SeqId s = e.kv->create();
  ForwardResult r = e.model->forward(Batch::sequence(s, kPrompt, 0, /*all_logits=*/true), *e.kv);
  ASSERT_EQ(r.logits.size(), kPrompt.size() * e.vocab());
  const double tol = dtype_is_quantized(GetParam().type) ? 4e-2 : 1e-4;  // see the top
  for (size_t t = 0; t < kPrompt.size(); ++t)
    EXPECT_LT(rel_err(r.logits_row(t), ref[t]), tol) << "position " << t;
}

INSTANTIATE_TEST_SUITE_P(
    AllTypes, EngineVsReference,
    testing::Values(Case{Arch::Llama, DType::F32}, Case{Arch::Llama, DType::F16},
                    Case{Arch::Llama, DType::BF16}, Case{Arch::Llama, DType::Q8_0},
                    Case{Arch::Llama, DType::Q4_0}, Case{Arch::Llama, DType::Q4_1},
                    Case{Arch::Llama, DType::Q4_K}, Case{Arch::Llama, DType::Q6_K},
                    Case{Arch::Qwen2, DType::F32}, Case{Arch::Qwen2, DType::Q8_0},
                    Case{Arch::Qwen3, DType::F32}, Case{Arch::Qwen3, DType::Q4_K}),
    case_name);

TEST(Engine, Llama3RopeScalingMatchesReference) {
  TempDir tmp;
  auto spec = test::tiny_spec(Arch::Llama, DType::F32);
  spec.llama3_rope = true;
  spec.rope_theta = 500000.0f;
  Engine e(test::write_tiny_gguf(spec, tmp.file("m.gguf")));
  ASSERT_NE(e.file.weights().rope_freqs, nullptr);
  std::vector<int32_t> long_prompt;
  for (int i = 0; i < 40; ++i) long_prompt.push_back((i * 37) % 250);
  const auto ref = test::reference_logits(e.file, long_prompt);
  SeqId s = e.kv->create();
  ForwardResult r = e.model->forward(Batch::sequence(s, long_prompt, 0, true), *e.kv);
  for (size_t t = 0; t < long_prompt.size(); t += 13)
    EXPECT_LT(rel_err(r.logits_row(t), ref[t]), 1e-4) << "position " << t;
}

// Quantization error relative to the same model stored as F32, at the last prompt position.
// Bounds are about 1.5-4x what was measured when written (F16 5e-4, BF16 4.8e-3, Q8_0 1.4e-2,
// Q6_K 3.4e-2, Q4_K 0.17, Q4_1 0.18, Q4_0 0.16). Uniform random weights are the worst case for
// block quantizers (no outliers to spend the scale on), so these exceed what real models see.
TEST(Engine, QuantizedModelsStayCloseToF32) {
  TempDir tmp;
  const std::pair<DType, double> bounds[] = {
      {DType::F16, 2e-3}, {DType::BF16, 2e-2}, {DType::Q8_0, 4e-2}, {DType::Q6_K, 8e-2},
      {DType::Q4_K, 0.35}, {DType::Q4_1, 0.35}, {DType::Q4_0, 0.35}};
  Engine f32(test::write_tiny_gguf(test::tiny_spec(Arch::Llama, DType::F32), tmp.file("f.gguf")));
  SeqId s0 = f32.kv->create();
  auto base = f32.model->forward(Batch::sequence(s0, kPrompt, 0), *f32.kv);
  for (const auto& [type, bound] : bounds) {
    Engine q(test::write_tiny_gguf(test::tiny_spec(Arch::Llama, type),
                                   tmp.file(std::string(dtype_name(type)) + ".gguf")));
    SeqId s = q.kv->create();
    auto r = q.model->forward(Batch::sequence(s, kPrompt, 0), *q.kv);
    const double err = rel_err(r.logits_row(0), base.logits_row(0), f32.vocab());
    EXPECT_LT(err, bound) << dtype_name(type);
    std::printf("[ quant err ] %-5s %.2e (bound %.2g)\n", std::string(dtype_name(type)).c_str(), err, bound);
  }
}

TEST(Engine, IncrementalDecodeEqualsBatchedPrefill) {
  TempDir tmp;
  Engine e(test::write_tiny_gguf(test::tiny_spec(Arch::Qwen2, DType::Q4_1), tmp.file("m.gguf")));
  SeqId a = e.kv->create();
  auto all = e.model->forward(Batch::sequence(a, kPrompt, 0, true), *e.kv);
  SeqId b = e.kv->create();
  e.model->forward(Batch::sequence(b, {kPrompt[0], kPrompt[1], kPrompt[2]}, 0), *e.kv);
  for (size_t t = 3; t < kPrompt.size(); ++t) {
    auto one = e.model->forward(Batch::sequence(b, {kPrompt[t]}, static_cast<int32_t>(t)), *e.kv);
    EXPECT_LT(rel_err(one.logits_row(0), all.logits_row(t), e.vocab()), 2e-5) << "position " << t;
  }
  EXPECT_EQ(e.kv->length(b), static_cast<int64_t>(kPrompt.size()));
}

// A prefix followed by two branches in one tree-masked batch gives each branch the logits it
// gets when run alone on a forked sequence.
TEST(Engine, TreeMaskedBatchEqualsSeparateBranches) {
  TempDir tmp;
  Engine e(test::write_tiny_gguf(test::tiny_spec(Arch::Llama, DType::Q8_0), tmp.file("m.gguf")));
  const std::vector<int32_t> prefix = {3, 14, 15, 92};
  const std::vector<int32_t> br1 = {65, 35}, br2 = {89, 79, 32};
  SeqId s = e.kv->create();
  e.model->forward(Batch::sequence(s, prefix, 0), *e.kv);
  const int32_t p0 = static_cast<int32_t>(prefix.size());

  // Tree batch: rows 0-1 branch 1, rows 2-4 branch 2; each row sees its own branch's ancestors.
  Batch tree;
  tree.tokens = {br1[0], br1[1], br2[0], br2[1], br2[2]};
  tree.positions = {p0, p0 + 1, p0, p0 + 1, p0 + 2};
  tree.seqs.assign(5, s);
  tree.mask.assign(25, 0);
  auto see = [&](int i, int j) { tree.mask[i * 5 + j] = 1; };
  see(0, 0); see(1, 0); see(1, 1);
  see(2, 2); see(3, 2); see(3, 3); see(4, 2); see(4, 3); see(4, 4);
  tree.logits_rows = {0, 1, 2, 3, 4};
  SeqId snapshot = e.kv->fork(s);  // the prefix alone, shared with s until s writes
  auto tr = e.model->forward(tree, *e.kv);

  auto run_branch = [&](const std::vector<int32_t>& br) {
    SeqId f = e.kv->fork(snapshot);
    auto r = e.model->forward(Batch::sequence(f, br, p0, true), *e.kv);
    e.kv->release(f);
    return r;
  };
  auto r1 = run_branch(br1), r2 = run_branch(br2);
  for (int i = 0; i < 2; ++i) EXPECT_LT(rel_err(tr.logits_row(i), r1.logits_row(i), e.vocab()), 2e-5);
  for (int i = 0; i < 3; ++i) EXPECT_LT(rel_err(tr.logits_row(2 + i), r2.logits_row(i), e.vocab()), 2e-5);

  // Keep branch 2's path (rows 2..4 = cache offsets 2..4 after the prefix) and continue decoding:
  // same logits as a sequence that only ever saw prefix + branch 2.
  const int32_t keep[] = {2, 3, 4};
  e.kv->compact(s, p0, keep);
  EXPECT_EQ(e.kv->length(s), p0 + 3);
  auto next = e.model->forward(Batch::sequence(s, {7}, p0 + 3), *e.kv);
  SeqId fresh = e.kv->create();
  std::vector<int32_t> full = prefix;
  full.insert(full.end(), br2.begin(), br2.end());
  full.push_back(7);
  auto want = e.model->forward(Batch::sequence(fresh, full, 0), *e.kv);
  EXPECT_LT(rel_err(next.logits_row(0), want.logits_row(0), e.vocab()), 2e-5);
  e.kv->release(snapshot);
}

TEST(Engine, SeveralSequencesInOneBatch) {
  TempDir tmp;
  Engine e(test::write_tiny_gguf(test::tiny_spec(Arch::Qwen3, DType::F16), tmp.file("m.gguf")));
  const std::vector<int32_t> p1 = {10, 20, 30}, p2 = {40, 50};
  SeqId a = e.kv->create(), b = e.kv->create();
  Batch both;
  both.tokens = {10, 40, 20, 50, 30};  // interleaved on purpose
  both.positions = {0, 0, 1, 1, 2};
  both.seqs = {a, b, a, b, a};
  both.logits_rows = {3, 4};
  auto r = e.model->forward(both, *e.kv);
  SeqId c = e.kv->create(), d = e.kv->create();
  auto ra = e.model->forward(Batch::sequence(c, p1, 0), *e.kv);
  auto rb = e.model->forward(Batch::sequence(d, p2, 0), *e.kv);
  EXPECT_LT(rel_err(r.logits_row(1), ra.logits_row(0), e.vocab()), 2e-5);
  EXPECT_LT(rel_err(r.logits_row(0), rb.logits_row(0), e.vocab()), 2e-5);
  EXPECT_EQ(e.kv->length(a), 3);
  EXPECT_EQ(e.kv->length(b), 2);
}

TEST(Engine, HiddenStatesOfChosenLayers) {
  TempDir tmp;
  Engine e(test::write_tiny_gguf(test::tiny_spec(Arch::Llama, DType::F32), tmp.file("m.gguf")));
  SeqId s = e.kv->create();
  Batch b = Batch::sequence(s, {1, 2, 3}, 0);
  b.hidden_layers = {0, 1};
  auto r = e.model->forward(b, *e.kv);
  ASSERT_EQ(r.hidden.size(), 2u);
  EXPECT_EQ(r.hidden[0].size(), 3u * 256u);
  EXPECT_NE(r.hidden[0], r.hidden[1]);
}

TEST(Engine, BadBatchIsRefusedAndCacheUnchanged) {
  TempDir tmp;
  Engine e(test::write_tiny_gguf(test::tiny_spec(Arch::Llama, DType::F32), tmp.file("m.gguf")));
  SeqId s = e.kv->create();
  e.model->forward(Batch::sequence(s, {1, 2, 3}, 0), *e.kv);
  EXPECT_THROW(e.model->forward(Batch::sequence(s, {4, 999}, 3), *e.kv), Error);  // bad token
  EXPECT_THROW(e.model->forward(Batch::sequence(s, {4}, 512), *e.kv), Error);     // past context
  EXPECT_EQ(e.kv->length(s), 3);
  // Mask across sequences is refused.
  SeqId t = e.kv->create();
  Batch b;
  b.tokens = {1, 2};
  b.positions = {3, 0};
  b.seqs = {s, t};
  b.mask = {1, 1, 1, 1};
  EXPECT_THROW(e.model->forward(b, *e.kv), Error);
  EXPECT_EQ(e.kv->length(s), 3);
  EXPECT_EQ(e.kv->length(t), 0);
}

}  // namespace
}  // namespace ssd
