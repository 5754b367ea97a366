// The fused Domino walk's CPU twin (tests/support/domino_twin.h: the kernels/common/
// domino_math.h arithmetic in the CUDA kernel's order) against the CPU head (DominoHead::walk,
// the op-by-op path every CPU run takes), on a tiny random BF16 head: several chains of
// different lengths in one walk, with the whole vocabulary and with a draft vocabulary, head on
// and off. This is what lets the device kernel, compared with the same twin in
// tests/unit/cuda/domino_walk_test.cpp, stand for the CPU head.
//
// Tolerances: greedy tokens must be identical (the test asserts every compared position's top-two
// gap is > 1e-3, far above the logit error, so equality is a real requirement); final logits
// within 2e-5 relative (max |a - b| / max |b| per row, as tests/support/rel_err.h): the two sum
// the same float32 products in different orders (the CPU matmul's SIMD lanes vs the device's
// 32-lane butterfly, fused multiply-adds in the twin), a few ulp per dot product, carried
// through the GRU state; observed below 1e-6. Head off: no arithmetic, so exactly equal.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "runtime/core/error.h"
#include "runtime/drafters/domino/domino_head.h"
#include "tests/support/domino_twin.h"
#include "tests/support/domino_writer.h"
#include "tests/support/rel_err.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tiny_model.h"
#include "tests/unit/spec/drafting_fixture.h"

namespace ssd {
namespace {

double top2_gap(const float* row, int64_t n) {
  std::vector<float> s(row, row + n);
  std::partial_sort(s.begin(), s.begin() + 2, s.end(), std::greater<>());
  return s[0] - s[1];
}

struct TwinWorld {
  test::TempDir tmp;
  std::unique_ptr<test::drafting::Engine> target;
  std::unique_ptr<DominoCheckpoint> ck;
  explicit TwinWorld(std::vector<int32_t> draft_vocab) {
    target = std::make_unique<test::drafting::Engine>(
        test::write_tiny_gguf(test::tiny_spec(Arch::Llama, DType::F32), tmp.file("t.gguf")), 1);
    test::DominoSpec spec = test::tiny_domino_spec();
    spec.type = DType::BF16;  // the values the device's BF16 weight copies hold
    spec.cfg.draft_vocab = std::move(draft_vocab);
    ck = std::make_unique<DominoCheckpoint>(
        DominoCheckpoint::open(test::write_domino(spec, tmp.file("d.safetensors"))));
  }
};

void check_twin_matches_cpu_head(const std::vector<int32_t>& draft_vocab, bool use_head) {
  TwinWorld w(draft_vocab);
  const DominoConfig& cfg = w.ck->config();
  const int64_t d = cfg.target_dim, vd = cfg.draft_vocab_size(), v = cfg.target_vocab;
  const std::vector<int32_t> ks = {7, 4, 1}, anchors = {17, 250, 3};
  std::vector<int64_t> first = {0};
  for (int32_t k : ks) first.push_back(first.back() + k);
  const int64_t rows = first.back();
  std::mt19937 rng(5);
  std::normal_distribution<float> n01(0.0f, 1.0f);
  std::vector<float> base(rows * vd), hidden(rows * d);
  for (float& x : base) x = 2.0f * n01(rng);
  for (float& x : hidden) x = n01(rng);

  DominoHead head(*w.ck, *w.target->model);
  std::vector<DominoChain> chains(ks.size());
  for (size_t c = 0; c < ks.size(); ++c) {
    chains[c].base = base.data() + first[c] * vd;
    chains[c].hidden = hidden.data() + first[c] * d;
    chains[c].anchor = anchors[c];
    chains[c].k = ks[c];
  }
  std::vector<std::vector<float>> finals;
  const std::vector<DraftTree> trees = head.walk(chains, use_head, &finals);

  const test::DominoTwinHead twin = test::domino_twin_head(*w.ck, w.target->file);
  std::vector<float> twin_logits = base;
  const std::vector<int32_t> twin_tokens =
      test::domino_twin_walk(twin, twin_logits.data(), hidden.data(), first, anchors, use_head);

  int changed = 0;  // positions where the head overrules the base argmax
  for (size_t c = 0; c < ks.size(); ++c) {
    ASSERT_EQ(trees[c].size(), static_cast<size_t>(ks[c]));
    for (int32_t i = 0; i < ks[c]; ++i) {
      const int64_t row = first[c] + i;
      const float* tw = twin_logits.data() + row * vd;
      ASSERT_GT(top2_gap(tw, vd), 1e-3) << "near-tie at chain " << c << " position " << i + 1;
      std::vector<float> cpu(vd);  // the CPU's final row at the draft ids
      for (int64_t t = 0; t < vd; ++t)
        cpu[t] = finals[c][i * v + (draft_vocab.empty() ? t : draft_vocab[t])];
      if (use_head) {
        EXPECT_LT(test::rel_err(tw, std::vector<double>(cpu.begin(), cpu.end())), 2e-5)
            << "chain " << c << " position " << i + 1;
      } else {
        EXPECT_TRUE(std::equal(cpu.begin(), cpu.end(), tw)) << "chain " << c << " pos " << i + 1;
      }
      EXPECT_EQ(twin_tokens[row], trees[c].tokens[i]) << "chain " << c << " position " << i + 1;
      const float* b = base.data() + row * vd;
      const int32_t base_pick = static_cast<int32_t>(std::max_element(b, b + vd) - b);
      changed += twin_tokens[row] !=
                 (draft_vocab.empty() ? base_pick : draft_vocab[base_pick]);
    }
  }
  if (use_head) EXPECT_GT(changed, 0) << "the random head never changes a choice: vacuous test";
  else EXPECT_EQ(changed, 0);
}

TEST(DominoHeadTwin, FusedWalkTwinEqualsCpuHeadFullVocabulary) {
  check_twin_matches_cpu_head({}, true);
}

TEST(DominoHeadTwin, FusedWalkTwinEqualsCpuHeadDraftVocabulary) {
  std::vector<int32_t> ids;
  for (int32_t t = 1; t < 261; t += 3) ids.push_back(t);
  check_twin_matches_cpu_head(ids, true);
}

TEST(DominoHeadTwin, HeadOffIsTheArgmaxOfTheBaseLogits) {
  check_twin_matches_cpu_head({}, false);
  std::vector<int32_t> ids;
  for (int32_t t = 0; t < 261; t += 2) ids.push_back(t);
  check_twin_matches_cpu_head(ids, false);
}

// The CPU backend has no fused walk, so the drafter keeps its op-by-op path there.
TEST(DominoHeadTwin, CpuBackendHasNoFusedWalk) {
  TwinWorld w({});
  DominoHead head(*w.ck, *w.target->model);
  EXPECT_FALSE(head.fused());
  DominoWalkCall call;
  EXPECT_THROW(w.target->model->backend().domino_walk(call), Error);
}

}  // namespace
}  // namespace ssd

namespace ssd {
namespace {

// Which chains the drafter sends to a backend's fused walk: greedy ones, and sampled ones whose
// draws need no Saguaro reshape at any of their depths (a reshaped q is drawn on the host).
TEST(DominoHeadTwin, FusedWalkTakesEveryChainButSaguaroReshapedOnes) {
  const SamplerConfig greedy{}, sampled{.temperature = 0.7f, .seed = 1};
  EXPECT_TRUE(DominoHead::walks_fused(greedy, nullptr, 7));
  EXPECT_TRUE(DominoHead::walks_fused(sampled, nullptr, 7));
  DraftRequest r;
  r.sampler = sampled;
  r.saguaro_c = 0.5;
  r.saguaro_top_f = {0, 0, 3};  // reshaped at depth 3 only
  EXPECT_TRUE(DominoHead::walks_fused(sampled, &r, 2));
  EXPECT_FALSE(DominoHead::walks_fused(sampled, &r, 3));
  EXPECT_TRUE(DominoHead::walks_fused(greedy, &r, 3));  // greedy: Saguaro never applies
  r.saguaro_c = 1.0;                                    // C = 1 is the identity
  EXPECT_TRUE(DominoHead::walks_fused(sampled, &r, 3));
}

}  // namespace
}  // namespace ssd
