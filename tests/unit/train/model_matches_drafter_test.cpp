// The trainer's forward IS the inference drafter's: parameters written with save_checkpoint and
// loaded by the runtime (DominoCheckpoint, DominoBackbone, DominoHead) give the same hidden
// states, base logits and final logits for a block as DominoTrainModel, with the trainer's head
// fed its own argmax (HeadInputs::Sampled == the greedy walk). Full vocabulary and a draft
// vocabulary; context_inject; blocks with several known tokens (the SSD shape).
//
// Tolerance: relative error (max |a - b| / max |b| per row) <= 1e-4: both sides are float32 with
// different accumulation orders (OpenBLAS sgemm vs the runtime's kernels) through ~10 matmul and
// norm stages; token choices are compared through the final logits, which would differ by O(1)
// if a GRU input differed.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "runtime/backend/backend.h"
#include "runtime/drafters/domino/domino_backbone.h"
#include "runtime/drafters/domino/domino_head.h"
#include "runtime/model/transformer.h"
#include "runtime/train/domino_train_model.h"
#include "runtime/train/train_checkpoint.h"
#include "tests/support/rel_err.h"
#include "tests/unit/train/train_fixture.h"

namespace ssd::train {
namespace {

double row_rel_err(const float* a, const float* b, int64_t n) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < n; ++i) {
    num = std::max(num, std::fabs(static_cast<double>(a[i]) - b[i]));
    den = std::max(den, std::fabs(static_cast<double>(b[i])));
  }
  return num / den;
}

void compare(std::vector<int32_t> draft_vocab, bool inject = false, int32_t known = 1) {
  DominoConfig cfg = test::tiny_train_config(8);
  cfg.draft_vocab = std::move(draft_vocab);
  cfg.context_inject = inject;
  test::TinyWorld w(cfg);
  if (inject) {  // starts at 0; give it weight so the term is really compared
    const ParamTensor& t = w.layout->find("ctx_inject.weight");
    for (int64_t i = 0; i < t.size; ++i)
      w.params[t.offset + i] = static_cast<float>(0.2 * rng_normal(77, 1, i));
  }
  const int64_t L = 20, F = cfg.feature_dim(), d = cfg.target_dim, Vd = cfg.draft_vocab_size(),
                V = cfg.target_vocab;
  std::vector<int32_t> tokens;
  std::vector<float> feats;
  test::random_sequence(L, F, V, 3, tokens, feats);

  const std::string ck_path = w.tmp.file("d.safetensors");
  save_checkpoint(ck_path, cfg, *w.layout, w.params.data(), DType::F32, {{"train.step", "0"}});
  const DominoCheckpoint ck = DominoCheckpoint::open(ck_path);
  auto backend = make_cpu_backend(1);
  Transformer target(*w.file, *backend);
  DominoBackbone bb(ck, target);
  DominoHead head(ck, target);

  DominoTrainModel model(cfg, *w.frozen);
  model.keep_logits(true);
  LossOptions opt;
  opt.lambda = 0.5f;
  opt.head_inputs = HeadInputs::Sampled;
  opt.known = known;
  // no context; a mid block; a block cut short by L (nv = 6)
  for (int32_t a : {known - 1, 9, 13}) {
    const int32_t n_ctx = a - known + 1;  // the block's known tokens t[n_ctx .. a] have no features
    const std::vector<int32_t> anchors = {a};
    model.run(make_view(*w.layout, cfg, static_cast<const float*>(w.params.data())), nullptr,
              tokens, feats, anchors, opt);
    const auto mine = model.block_out(0);
    const int64_t nv = std::min<int64_t>(cfg.block_size - 1, L - 1 - a);
    ASSERT_EQ(mine.rows, nv);

    KvCache kv(bb.kv_config(256));
    const SeqId s = kv.create();
    std::vector<float> urows;
    bb.append_context(kv, s, 0, std::span<const float>(feats.data(), n_ctx * F),
                      inject ? &urows : nullptr);
    DominoBackbone::Block blk{s, n_ctx, {tokens.begin() + n_ctx, tokens.begin() + a + 1},
                              static_cast<int32_t>(nv)};
    if (inject && n_ctx > 0) blk.inject = urows.data() + (n_ctx - 1) * d;
    const auto res = bb.forward(kv, {&blk, 1});
    DominoChain ch;
    ch.base = res.logits.data();
    ch.hidden = res.hidden.data();
    ch.anchor = tokens[a];
    ch.k = static_cast<int32_t>(nv);
    std::vector<std::vector<float>> finals;
    head.walk({&ch, 1}, true, &finals);
    for (int64_t i = 0; i < nv; ++i) {
      EXPECT_LT(row_rel_err(mine.hidden.data() + i * d, res.hidden.data() + i * d, d), 1e-4)
          << "anchor " << a << " position " << i + 1;
      EXPECT_LT(row_rel_err(mine.base.data() + i * Vd, res.logits.data() + i * Vd, Vd), 1e-4)
          << "anchor " << a << " position " << i + 1;
      // The runtime's final row is over target ids (-inf outside the draft vocabulary).
      std::vector<float> want(Vd);
      for (int64_t t = 0; t < Vd; ++t)
        want[t] = finals[0][i * V + (cfg.draft_vocab.empty() ? t : cfg.draft_vocab[t])];
      EXPECT_LT(row_rel_err(mine.final_logits.data() + i * Vd, want.data(), Vd), 1e-4)
          << "anchor " << a << " position " << i + 1;
      // The head must really act here, or the final comparison would only repeat the base one.
      EXPECT_GT(row_rel_err(mine.final_logits.data() + i * Vd, mine.base.data() + i * Vd, Vd),
                1e-2);
    }
  }
}

TEST(DominoTrainModel, ForwardEqualsInferenceDrafter) { compare({}); }

TEST(DominoTrainModel, ForwardEqualsInferenceDrafterWithContextInject) {
  compare({}, /*inject=*/true);
}

// SSD-shaped blocks: three known tokens without features, [t[a-2], t[a-1], t[a], MASK...].
TEST(DominoTrainModel, ForwardEqualsInferenceDrafterWithKnownTokens) {
  compare({}, /*inject=*/false, /*known=*/3);
  compare({}, /*inject=*/true, /*known=*/3);
}

TEST(DominoTrainModel, ForwardEqualsInferenceDrafterWithDraftVocab) {
  std::vector<int32_t> vocab;
  for (int32_t t = 3; t < 261; t += 3) vocab.push_back(t);
  compare(vocab);
}

}  // namespace
}  // namespace ssd::train
