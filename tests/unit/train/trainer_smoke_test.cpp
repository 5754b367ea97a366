// End-to-end training on a tiny target (the trainer's CI smoke test), through the real data
// path: a synthetic self-distillation file written with DistillWriter (tokens follow a fixed
// successor rule t' = (7 t + 3) mod 261, so what comes after the anchor is learnable; features
// random), trained by train_domino, the checkpoint loaded by the runtime's DominoDrafter.
//   - the loss goes down: the last logged window's mean loss is below 70% of the first's (a
//     learnable rule and lr 3e-3 cut it far more; a broken gradient or update leaves it flat);
//   - the checkpoint loads with --drafter domino:PATH semantics and drafts B-1 tokens;
//   - N steps == N/2 steps + --resume for N/2: parameters and AdamW moments bit-identical (one
//     thread, the random draws depend on (seed, step) only);
//   - the draft vocabulary is the most frequent response tokens; a --resume with another config
//     is refused.
#include <gtest/gtest.h>

#include "runtime/backend/backend.h"
#include "runtime/core/error.h"
#include "runtime/drafters/domino/domino_drafter.h"
#include "runtime/model/transformer.h"
#include "runtime/train/distill_dataset.h"
#include "runtime/train/draft_vocab.h"
#include "runtime/train/ops_linear.h"
#include "runtime/train/train_checkpoint.h"
#include "runtime/train/train_data_source.h"
#include "tests/unit/train/train_fixture.h"

namespace ssd::train {
namespace {

int32_t successor(int32_t t) { return (7 * t + 3) % 261; }

std::string write_data(const test::TinyWorld& w, const std::string& path, int n_seqs) {
  const int64_t F = w.cfg.feature_dim();
  DistillWriter wr(path, w.cfg.target_layers, w.cfg.target_dim, w.cfg.target_vocab, "tiny");
  for (int s = 0; s < n_seqs; ++s) {
    std::vector<int32_t> tokens = {static_cast<int32_t>(rng_below(4, 1, s, 261))};
    for (int i = 1; i < 28; ++i) tokens.push_back(successor(tokens.back()));
    std::vector<float> feats(tokens.size() * F);
    for (size_t i = 0; i < feats.size(); ++i)
      feats[i] = static_cast<float>(rng_uniform(5, s, i) - 0.5);
    wr.add(tokens, 3, feats);
  }
  wr.finish();
  return path;
}

TrainOptions smoke_options(const DominoConfig& cfg) {
  TrainOptions o;
  o.cfg = cfg;
  o.steps = 40;
  o.batch_seqs = 2;
  o.anchors = 4;
  o.gamma = 3.0f;
  o.adam.lr = 3e-3;
  o.warmup_frac = 0.05;
  o.init_layers = {1, 0};
  o.log_every = 10;
  o.seed = 3;
  return o;
}

TEST(DominoTrainer, SmokeLossFallsAndCheckpointDrafts) {
  set_blas_threads(1);
  test::TinyWorld w;
  const DistillDataset ds = DistillDataset::open(write_data(w, w.tmp.file("d.dist"), 12));
  TrainOptions o = smoke_options(w.cfg);
  o.out = w.tmp.file("domino.safetensors");
  o.log_json = w.tmp.file("log.jsonl");
  const TrainSummary s = train_domino(*w.file, train_data_from(ds), o, nullptr);
  EXPECT_EQ(s.steps_done, 40);
  const double first = s.first_log.loss / s.first_log.blocks;
  const double last = s.last_log.loss / s.last_log.blocks;
  EXPECT_LT(last, 0.7 * first) << "first window " << first << ", last " << last;

  // The checkpoint is a drafter the runtime loads and drafts with.
  auto backend = make_cpu_backend(1);
  Transformer target(*w.file, *backend);
  DominoOptions dopt;
  dopt.path = o.out;
  DominoDrafter drafter(target, dopt);
  const DistillSequence seq = ds.read(0);
  const int64_t n_feat = 10;
  drafter.start(0, std::span<const int32_t>(seq.tokens.data(), n_feat + 1));
  drafter.set_features(0, 0, std::span<const float>(seq.features.data(),
                                                    n_feat * w.cfg.feature_dim()));
  DraftRequest r;
  r.k = w.cfg.block_size - 1;
  const DraftTree t = drafter.draft({&r, 1}).at(0);
  EXPECT_EQ(t.size(), static_cast<size_t>(w.cfg.block_size - 1));
}

TEST(DominoTrainer, ResumeContinuesBitForBit) {
  set_blas_threads(1);
  test::TinyWorld w;
  const DistillDataset ds = DistillDataset::open(write_data(w, w.tmp.file("d.dist"), 6));
  TrainOptions o = smoke_options(w.cfg);
  o.steps = 8;
  o.out = w.tmp.file("full.safetensors");
  train_domino(*w.file, train_data_from(ds), o, nullptr);

  o.out = w.tmp.file("half.safetensors");
  o.stop_at_step = 4;
  const TrainSummary a = train_domino(*w.file, train_data_from(ds), o, nullptr);
  EXPECT_EQ(a.steps_done, 4);
  EXPECT_TRUE(a.stopped_by_time);
  o.stop_at_step = 0;
  o.resume = o.out;
  const TrainSummary b = train_domino(*w.file, train_data_from(ds), o, nullptr);
  EXPECT_EQ(b.first_step, 4);
  EXPECT_EQ(b.steps_done, 8);

  const int64_t n = ParamLayout(w.cfg).total();
  const OptimState full = load_optim_state(w.tmp.file("full.safetensors.optim"), n);
  const OptimState resumed = load_optim_state(o.out + ".optim", n);
  EXPECT_EQ(full.step, 8);
  EXPECT_EQ(resumed.step, 8);
  EXPECT_TRUE(full.params == resumed.params) << "parameters differ after resumption";
  EXPECT_TRUE(full.m == resumed.m && full.v == resumed.v) << "moments differ";
  // The first half really changed something (else equality would prove nothing).
  const OptimState init_like = load_optim_state(w.tmp.file("full.safetensors.optim"), n);
  EXPECT_NE(init_like.m, std::vector<float>(n, 0.0f));

  // Resuming with another config is refused with a clear error.
  TrainOptions other = o;
  other.cfg.gru_dim = 16;
  EXPECT_THROW(train_domino(*w.file, train_data_from(ds), other, nullptr), Error);
}

TEST(DominoTrainer, DraftVocabIsTheMostFrequentResponseTokens) {
  const std::vector<int64_t> counts = {5, 0, 9, 9, 1, 7};
  EXPECT_EQ(select_draft_vocab(counts, 3), (std::vector<int32_t>{2, 3, 5}));
  EXPECT_EQ(select_draft_vocab(counts, 4), (std::vector<int32_t>{0, 2, 3, 5}));
  EXPECT_NEAR(draft_vocab_coverage(counts, {2, 3}), 18.0 / 31.0, 1e-12);
  EXPECT_THROW(select_draft_vocab(counts, 7), Error);
}

}  // namespace
}  // namespace ssd::train
