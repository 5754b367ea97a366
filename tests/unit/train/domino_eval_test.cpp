// The offline evaluator (runtime/train/domino_eval.h) against the inference drafter: on a tiny
// target with a random drafter, sequences are built so that the target's "greedy continuation"
// after the anchor agrees with the drafter's own greedy walk (DominoDrafter, the runtime's code)
// for exactly j tokens, j = 0..B-1, and then differs. The evaluator must report each block's
// accepted prefix as exactly j: that is what a greedy verifier would accept, so its MAL is the
// run's MAL on those blocks. Also with context_inject (its weight made non-zero), with SSD-shaped
// blocks (3 known tokens after the last featured position), and the MAL formula on a hand-made
// histogram.
//
// Exact equality is required: both sides choose tokens by argmax over float32 logits that agree to
// ~1e-6 relative (model_matches_drafter_test.cpp), and the random drafter's top-two gaps are far
// larger, so a mismatch means a wrong row, label or prefix rule, not rounding.
#include <gtest/gtest.h>

#include "runtime/backend/backend.h"
#include "runtime/core/error.h"
#include "runtime/drafters/domino/domino_drafter.h"
#include "runtime/model/transformer.h"
#include "runtime/train/domino_eval.h"
#include "runtime/train/train_checkpoint.h"
#include "tests/unit/train/train_fixture.h"

namespace ssd::train {
namespace {

void check_prefixes(bool inject, int32_t known = 1) {
  DominoConfig cfg = test::tiny_train_config(6);
  cfg.context_inject = inject;
  test::TinyWorld w(cfg);
  if (inject) {
    const ParamTensor& t = w.layout->find("ctx_inject.weight");
    for (int64_t i = 0; i < t.size; ++i)
      w.params[t.offset + i] = static_cast<float>(0.2 * rng_normal(77, 1, i));
  }
  const std::string ck = w.tmp.file("d.safetensors");
  save_checkpoint(ck, cfg, *w.layout, w.params.data(), DType::F32, {});
  auto backend = make_cpu_backend(1);
  Transformer target(*w.file, *backend);
  DominoOptions dopt;
  dopt.path = ck;

  // One anchor per sequence: L = 20, B = 6, P = 15 -> the only full block is a = 14.
  const int32_t B = cfg.block_size, L = 20, P = 15, a = L - B;
  const int64_t F = cfg.feature_dim();
  std::vector<std::vector<int32_t>> seqs;
  std::vector<std::vector<float>> feats;
  std::vector<int64_t> want(B, 0);
  for (int s = 0; s < 2 * B; ++s) {
    std::vector<int32_t> tokens;
    std::vector<float> f;
    test::random_sequence(L, F, cfg.target_vocab, 40 + s, tokens, f);
    DominoDrafter drafter(target, dopt);
    drafter.start(0, std::span<const int32_t>(tokens.data(), a + 1));
    // Features stop before the block's known tokens t[a-known+1 .. a] (SSD's shape when > 1).
    drafter.set_features(0, 0, std::span<const float>(f.data(), (a - known + 1) * F));
    DraftRequest r;
    r.k = B - 1;
    const DraftTree walk = drafter.draft({&r, 1}).at(0);
    ASSERT_EQ(walk.size(), static_cast<size_t>(B - 1));
    const int32_t j = s % B;  // agree for j tokens, then differ
    for (int32_t i = 1; i <= j; ++i) tokens[a + i] = walk.tokens[i - 1];
    if (j < B - 1) tokens[a + j + 1] = (walk.tokens[j] + 1) % static_cast<int32_t>(cfg.target_vocab);
    ++want[j];
    seqs.push_back(std::move(tokens));
    feats.push_back(std::move(f));
  }
  TrainData data;
  data.size = seqs.size();
  data.length = [&](size_t) { return L; };
  data.prompt_len = [&](size_t) { return P; };
  data.read = [&](size_t i, std::vector<int32_t>& t, std::vector<float>& f) {
    t = seqs[i];
    f = feats[i];
  };
  EvalOptions o;
  o.stride = 4;
  o.known = known;
  const EvalReport rep = evaluate_domino(cfg, *w.frozen, w.params, data, o);
  EXPECT_EQ(rep.rows, B);
  EXPECT_EQ(rep.seqs, 2 * B);
  EXPECT_EQ(rep.blocks, 2 * B);
  EXPECT_EQ(rep.accepted, want);
  // Position 1 is right in every block with j >= 1: 10 of 12.
  EXPECT_EQ(rep.hits_final[1], 2 * (B - 1));
  EXPECT_EQ(rep.labelled[1], 2 * B);
}

TEST(DominoEval, AcceptedPrefixIsWhatTheDrafterWalkMatches) { check_prefixes(false); }
TEST(DominoEval, AcceptedPrefixWithContextInject) { check_prefixes(true); }
TEST(DominoEval, AcceptedPrefixWithKnownTokens) { check_prefixes(true, /*known=*/3); }

TEST(DominoEval, MeanAcceptanceLengthCapsDraftsAtK) {
  EvalReport r;
  r.rows = 6;
  r.accepted = {2, 1, 1, 0, 0, 0};  // 4 blocks: prefixes 0, 0, 1, 2
  r.blocks = 4;
  EXPECT_DOUBLE_EQ(r.mal(5), 1.0 + 3.0 / 4.0);
  EXPECT_DOUBLE_EQ(r.mal(1), 1.0 + 2.0 / 4.0);
  EXPECT_DOUBLE_EQ(r.mal(0), 1.0);
  EXPECT_THROW(r.mal(6), Error);
}

}  // namespace
}  // namespace ssd::train
