// The early-exit self-speculative drafter (`--drafter early-exit:L`, runtime/drafters/
// early_exit_drafter.h) on a tiny 4-layer random target: greedy SD equals AR token for token for
// L in {1, 2} and several K, with and without DVI online learning; the untrained head is exactly
// the target's LM head applied to layer L's hidden state; sampled drafts carry the q they were
// drawn from; batched requests equal single ones; seeded runs repeat; bad options are refused;
// and online learning raises the acceptance rate over a run.
//
// Tolerances: hidden states / logits of the drafter's L-block forward vs the full target's
// layer-L output and a float64 manual head: 1e-5 relative (the same float32 ops on the same rows;
// the manual head differs only by float64 accumulation). Sampled q vs process() of recomputed
// logits: 1e-4 in probability (different batch grouping, logits agree to ~2e-5 relative).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "kernels/cpu/rowops.h"
#include "runtime/core/error.h"
#include "runtime/drafters/early_exit_drafter.h"
#include "tests/support/rel_err.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tiny_model.h"
#include "tests/unit/spec/drafting_fixture.h"

namespace ssd {
namespace {

using test::TempDir;
using test::drafting::Engine;
using test::drafting::kPrompts;

// A 4-layer tiny target, so that an exit at L = 1 or 2 leaves layers that change the prediction.
struct World {
  TempDir tmp;
  std::unique_ptr<Engine> target;
  explicit World(int64_t layers = 4) {
    test::TinyModelSpec t = test::tiny_spec(Arch::Llama, DType::F32);
    t.n_layers = layers;
    target = std::make_unique<Engine>(test::write_tiny_gguf(t, tmp.file("target.gguf")));
  }
  std::unique_ptr<EarlyExitDrafter> drafter(int64_t L, bool learn, EarlyExitOptions o = {}) {
    o.layers = L;
    o.online_learning = learn;
    return std::make_unique<EarlyExitDrafter>(target->file, *target->backend, o);
  }
};

using test::rel_err;

// DVI settings for a 261-token vocabulary: the whole target distribution, small frequent updates.
DviOptions tiny_dvi() {
  DviOptions d;
  d.capacity = 64;
  d.train_every = 4;
  d.batch = 16;
  d.kl_updates = 20;
  d.target_top_k = 0;
  d.lr = 1e-2;
  return d;
}

struct Case {
  int64_t L;
  int32_t k;
  bool learn;
};
std::string case_name(const testing::TestParamInfo<Case>& p) {
  return "L" + std::to_string(p.param.L) + "_K" + std::to_string(p.param.k) +
         (p.param.learn ? "_dvi" : "");
}

class EarlyExitGreedy : public testing::TestWithParam<Case> {};

TEST_P(EarlyExitGreedy, SdEqualsAr) {
  World w;
  EarlyExitOptions o;
  o.dvi = tiny_dvi();
  auto d = w.drafter(GetParam().L, GetParam().learn, o);
  for (const auto& prompt : kPrompts) {
    const auto ar = w.target->ar(prompt, 40);
    const auto sd = w.target->sd(*d, prompt, 40, GetParam().k, 1);
    EXPECT_EQ(sd.gen.tokens, ar.tokens);
    EXPECT_LT(sd.stats.rounds, 40) << "some draft token should be accepted";
  }
  if (GetParam().learn) {
    EXPECT_GT(d->trainer()->stats().updates, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Tiny, EarlyExitGreedy,
                         testing::Values(Case{1, 1, false}, Case{1, 3, false}, Case{1, 5, false},
                                         Case{2, 1, false}, Case{2, 3, false}, Case{2, 5, false},
                                         Case{1, 3, true}, Case{1, 5, true}, Case{2, 3, true},
                                         Case{2, 5, true}),
                         case_name);

TEST(EarlyExitDrafter, ZeroInitHeadIsTheLmHeadOnLayerL) {
  World w;
  const ModelConfig& c = w.target->file.config();
  const std::vector<int32_t>& prompt = kPrompts[0];
  for (int64_t L : {1, 2, 3}) {
    auto d = w.drafter(L, false);
    // The full target's output of block L (0-based L - 1) over the prompt.
    const SeqId s = w.target->kv->create();
    Batch b = Batch::sequence(s, prompt, 0);
    b.hidden_layers = {static_cast<int32_t>(L - 1)};
    const ForwardResult fr = w.target->model->forward(b, *w.target->kv);
    w.target->kv->release(s);
    const std::vector<float>& h = fr.hidden[0];  // [n, dim]

    // The drafter's own L-block forward gives the same hidden states.
    const std::vector<float> hd = d->hidden_of(prompt);
    ASSERT_EQ(hd.size(), h.size());
    EXPECT_LT(rel_err(hd.data(), std::vector<double>(h.begin(), h.end())), 1e-5) << "L " << L;

    // Manual head in float64: z = h / rms(h) * g_final, logits = W z.
    const Weight& W = w.target->model->lm_head();
    const std::vector<float>& g = w.target->model->output_norm();
    std::vector<float> row(static_cast<size_t>(c.dim));
    const std::vector<float> logits = d->head_logits(h, static_cast<int64_t>(prompt.size()));
    for (size_t t = 0; t < prompt.size(); ++t) {
      const float* x = h.data() + t * c.dim;
      double ss = 0;
      for (int64_t i = 0; i < c.dim; ++i) ss += static_cast<double>(x[i]) * x[i];
      const double inv = 1.0 / std::sqrt(ss / c.dim + c.rms_eps);
      std::vector<double> ref(static_cast<size_t>(c.vocab));
      for (int64_t v = 0; v < c.vocab; ++v) {
        kernels::dequantize_row(W.type, W.data + v * W.row_bytes, row.data(), c.dim);
        double acc = 0;
        for (int64_t i = 0; i < c.dim; ++i) acc += static_cast<double>(row[i]) * x[i] * inv * g[i];
        ref[v] = acc;
      }
      EXPECT_LT(rel_err(logits.data() + t * c.vocab, ref), 1e-5) << "L " << L << " row " << t;
    }
    // The first greedy draft after the prompt is that head's argmax at the last position.
    d->start(0, prompt);
    DraftRequest r;
    r.k = 1;
    const DraftTree tree = d->draft({&r, 1}).at(0);
    ASSERT_EQ(tree.size(), 1u);
    EXPECT_EQ(tree.tokens[0],
              argmax(logits.data() + (prompt.size() - 1) * c.vocab, static_cast<int32_t>(c.vocab)));
  }
}

TEST(EarlyExitDrafter, SampledDraftCarriesItsQ) {
  World w;
  auto d = w.drafter(2, false);
  const std::vector<int32_t>& prompt = kPrompts[1];
  d->start(0, prompt);
  DraftRequest r;
  r.k = 3;
  r.sampler = {.temperature = 0.8f, .top_k = 40, .seed = 11};
  r.stream = 5;
  r.position = 2;
  const DraftTree tree = d->draft({&r, 1}).at(0);
  ASSERT_EQ(tree.size(), 3u);
  ASSERT_TRUE(tree.is_chain());
  // Recompute each position's distribution from scratch on context + the drafted prefix.
  std::vector<int32_t> ctx = prompt;
  const int64_t V = w.target->vocab(), D = w.target->file.config().dim;
  for (size_t i = 0; i < tree.size(); ++i) {
    const std::vector<float> h = d->hidden_of(ctx);
    const std::vector<float> last(h.end() - D, h.end());
    const std::vector<float> l = d->head_logits(last, 1);
    const ProcessedDist q = process(l.data(), static_cast<int32_t>(V), r.sampler);
    ASSERT_EQ(q.size(), tree.q[i].size());
    for (const TokenProb& tp : q.tokens) EXPECT_NEAR(tree.q[i].prob_of(tp.id), tp.prob, 1e-4);
    // The token is the inverse-CDF draw at the drafter's own Philox lane.
    const double u = philox_uniform(11, 5, static_cast<uint32_t>(2 + i), kLaneEarlyExitDraft);
    EXPECT_EQ(tree.tokens[i], sample(tree.q[i], u));
    ctx.push_back(tree.tokens[i]);
  }
}

TEST(EarlyExitDrafter, SampledSdRunsAndRepeatsWithItsSeed) {
  World w;
  const SamplerConfig s{.temperature = 1.0f, .top_p = 0.9f, .seed = 3};
  std::vector<int32_t> first;
  for (int rep = 0; rep < 2; ++rep) {
    EarlyExitOptions o;
    o.dvi = tiny_dvi();
    auto d = w.drafter(2, true, o);
    const auto sd = w.target->sd(*d, kPrompts[0], 40, 4, 1, s, 9);
    EXPECT_EQ(sd.gen.tokens.size(), 40u);
    if (rep == 0) first = sd.gen.tokens;
    else EXPECT_EQ(sd.gen.tokens, first);
  }
}

TEST(EarlyExitDrafter, BatchedRequestsEqualSingleOnes) {
  World w;
  auto batched = w.drafter(2, false);
  auto single = w.drafter(2, false);
  for (auto* d : {batched.get(), single.get()}) {
    d->start(0, kPrompts[0]);
    d->start(1, kPrompts[1]);
  }
  std::vector<DraftRequest> reqs(3);
  reqs[0].seq = 0;
  reqs[0].k = 4;
  reqs[1].seq = 1;
  reqs[1].k = 3;
  reqs[2].seq = 0;  // a second, hypothetical continuation of sequence 0 (works on a fork)
  reqs[2].suffix = {17, 250};
  reqs[2].k = 5;
  for (int round = 0; round < 2; ++round) {
    const auto together = batched->draft(reqs);
    for (size_t i = 0; i < reqs.size(); ++i) {
      const auto alone = single->draft({&reqs[i], 1}).at(0);
      EXPECT_EQ(together[i].tokens, alone.tokens) << "round " << round << " request " << i;
    }
    // Commit a few tokens so that the second round exercises the lazy catch-up.
    for (auto* d : {batched.get(), single.get()}) {
      d->commit(0, std::vector<int32_t>{together[0].tokens[0], 3});
      d->commit(1, std::vector<int32_t>{together[1].tokens[0]});
    }
  }
}

TEST(EarlyExitDrafter, RefusesBadOptions) {
  World w;
  EXPECT_THROW(w.drafter(0, false), Error);
  EXPECT_THROW(w.drafter(5, false), Error);  // the target has 4 layers
  EarlyExitOptions o;
  o.lora.rank = 0;
  EXPECT_THROW(w.drafter(2, false, o), Error);
  o = {};
  o.dvi.batch = o.dvi.capacity + 1;
  EXPECT_THROW(w.drafter(2, true, o), Error);
  auto d = w.drafter(2, false);
  DraftRequest r;
  EXPECT_THROW(d->draft({&r, 1}), Error);  // sequence 0 was never started
}

}  // namespace
}  // namespace ssd
