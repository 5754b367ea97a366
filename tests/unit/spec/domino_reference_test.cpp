// The Domino drafter's arithmetic against the float64 reference (tests/support/domino_reference),
// on a tiny target with a random Domino checkpoint:
//   - the backbone's base logits and hidden states for a block after real target features;
//   - a block with known suffix tokens in front (the SSD pre-speculation case);
//   - context features appended in chunks == delivered at once; several blocks in one batched
//     pass == one at a time (the context cache and batching change nothing); re-delivered
//     features replace entries, gaps are refused, a fully featured context keeps its anchor;
//   - the head's walk (GRU + low-rank correction + argmax chain) from given base logits and
//     hidden states; the head really changes choices; with the head off the drafts are the argmax
//     of the base logits; a sampled draft's q is the softmax of the final logits.
//
// Tolerances (relative = max |a - b| / max |b| over a row set):
//   implementation vs float64 reference: 1e-4 (float32 activations and accumulation, ~10 matmul
//     and norm stages deep; observed below 1e-6);
//   chunked vs one-shot context, batched vs single blocks: 2e-5 (same float32 arithmetic grouped
//     differently, as in tests/unit/engine/transformer_test.cpp);
//   token choices must be equal; the test asserts that the reference's top-two gap at every
//     compared position is > 1e-3, far above the logit error, so equality is a real requirement;
//   sampled q vs softmax of the reference final logits at T = 0.8: 1e-4 absolute per token.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "runtime/core/error.h"
#include "runtime/drafters/domino/domino_drafter.h"
#include "tests/support/rel_err.h"
#include "tests/support/domino_reference.h"
#include "tests/support/domino_writer.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tiny_model.h"
#include "tests/unit/spec/drafting_fixture.h"

namespace ssd {
namespace {

using test::TempDir;

using test::rel_err;

// Gap between the largest and second largest entry.
double top2_gap(const std::vector<double>& v) {
  std::vector<double> s = v;
  std::partial_sort(s.begin(), s.begin() + 2, s.end(), std::greater<>());
  return s[0] - s[1];
}

int32_t argmax_of(const std::vector<double>& v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

// 13 tokens: the first 12 have target features, the 13th is the root (anchor).
const std::vector<int32_t> kTokens = {5, 77, 258, 1, 140, 33, 200, 9, 101, 44, 250, 17, 61};

struct World {
  TempDir tmp;
  std::unique_ptr<test::drafting::Engine> target;
  std::string path;
  std::unique_ptr<DominoCheckpoint> ck;
  std::unique_ptr<test::DominoReference> ref;
  std::vector<float> features;  // [12, 2 * 256]: target layers 0 and 1 of kTokens[0..12)
  // draft_vocab: the checkpoint's draft vocabulary (empty = the whole vocabulary).
  explicit World(std::vector<int32_t> draft_vocab = {}, bool context_inject = false) {
    target = std::make_unique<test::drafting::Engine>(
        test::write_tiny_gguf(test::tiny_spec(Arch::Llama, DType::F32), tmp.file("t.gguf")), 2);
    test::DominoSpec spec = test::tiny_domino_spec();
    spec.cfg.draft_vocab = std::move(draft_vocab);
    spec.cfg.context_inject = context_inject;
    path = test::write_domino(spec, tmp.file("d.safetensors"));
    ck = std::make_unique<DominoCheckpoint>(DominoCheckpoint::open(path));
    ref = std::make_unique<test::DominoReference>(*ck, target->file);
    std::vector<int32_t> ctx(kTokens.begin(), kTokens.end() - 1);
    Batch b = Batch::sequence(target->kv->create(), ctx, 0);
    b.hidden_layers = {0, 1};
    const ForwardResult fr = target->model->forward(b, *target->kv);
    for (size_t r = 0; r < ctx.size(); ++r)
      for (const auto& layer : fr.hidden)
        features.insert(features.end(), layer.begin() + r * 256, layer.begin() + (r + 1) * 256);
  }
  std::unique_ptr<DominoDrafter> drafter(bool head) {
    DominoOptions o;
    o.path = path;
    o.head = head;
    auto d = std::make_unique<DominoDrafter>(*target->model, o);
    d->start(0, kTokens);
    d->set_features(0, 0, features);
    return d;
  }
};

TEST(DominoReference, BackboneMatchesFloat64Reference) {
  World w;
  DominoBackbone bb(*w.ck, *w.target->model);
  KvCache kv(bb.kv_config(256));
  const SeqId s = kv.create();
  bb.append_context(kv, s, 0, w.features);
  DominoBackbone::Block blk{s, 12, {kTokens.back()}, 7};
  const auto res = bb.forward(kv, {&blk, 1});
  EXPECT_EQ(kv.length(s), 12);  // the block's entries lived in a fork only
  const auto want = w.ref->block(w.features, {kTokens.back()});
  ASSERT_EQ(res.offset, (std::vector<int64_t>{0, 7}));
  for (int i = 0; i < 7; ++i) {
    EXPECT_LT(rel_err(res.hidden.data() + i * 256, want.hidden[i]), 1e-4) << "position " << i + 1;
    EXPECT_LT(rel_err(res.logits.data() + i * 261, want.logits[i]), 1e-4) << "position " << i + 1;
  }
}

TEST(DominoReference, KnownSuffixTokensGoInFrontOfTheBlock) {
  World w;
  auto d = w.drafter(/*head=*/false);
  DraftRequest r;
  r.k = 7;
  r.suffix = {90, 3};  // hypothetical tokens after the root: block [root, 90, 3, MASK x 7]
  const DraftTree t = d->draft({&r, 1}).at(0);
  const auto want = w.ref->block(w.features, {kTokens.back(), 90, 3});
  ASSERT_EQ(t.size(), 7u);
  for (int i = 0; i < 7; ++i) {
    ASSERT_GT(top2_gap(want.logits[i]), 1e-3) << "near-tie at " << i;
    EXPECT_EQ(t.tokens[i], argmax_of(want.logits[i])) << "position " << i + 1;
  }
}

// context_inject: the drafter keeps u_j = W_inject c_j per position (through chunked and
// re-delivered features) and adds u_{n_ctx-1} to every row; the reference does it from the
// equation. Without the term the logits would differ by O(1) (the random W_inject is not small).
TEST(DominoReference, ContextInjectMatchesFloat64Reference) {
  World w({}, /*context_inject=*/true);
  DominoOptions o;
  o.path = w.path;
  o.head = false;
  DominoDrafter d(*w.target->model, o);
  d.start(0, kTokens);
  const int64_t f = 512;
  d.set_features(0, 0, {w.features.data(), static_cast<size_t>(8 * f)});
  d.set_features(0, 5, {w.features.data() + 5 * f, static_cast<size_t>(7 * f)});  // re-delivers 5..7
  for (const std::vector<int32_t>& suffix : {std::vector<int32_t>{}, std::vector<int32_t>{90, 3}}) {
    DraftRequest r;
    r.k = 7;
    r.suffix = suffix;
    const DraftTree t = d.draft({&r, 1}).at(0);
    std::vector<int32_t> known = {kTokens.back()};
    known.insert(known.end(), suffix.begin(), suffix.end());
    const auto want = w.ref->block(w.features, known);
    ASSERT_EQ(t.size(), 7u);
    const auto plain = w.ref->block(w.features, known, /*with_inject=*/false);
    double diff = 0, scale = 0;
    for (size_t v = 0; v < want.logits[0].size(); ++v) {
      diff = std::max(diff, std::fabs(plain.logits[0][v] - want.logits[0][v]));
      scale = std::max(scale, std::fabs(want.logits[0][v]));
    }
    EXPECT_GT(diff, 0.05 * scale) << "the term must matter";
    for (int i = 0; i < 7; ++i) {
      ASSERT_GT(top2_gap(want.logits[i]), 1e-3) << "near-tie at " << i;
      EXPECT_EQ(t.tokens[i], argmax_of(want.logits[i])) << "suffix " << suffix.size() << " position " << i + 1;
    }
  }
}

// --domino-block trim: a block of k MASK rows (not B - 1) is the reference's trimmed block, and
// the rows dropped did matter (the full block's logits differ).
TEST(DominoReference, TrimmedBlockRunsOnlyTheWantedMaskRows) {
  World w;
  DominoOptions o;
  o.path = w.path;
  o.head = false;
  o.trim_block = true;
  DominoDrafter d(*w.target->model, o);
  d.start(0, kTokens);
  d.set_features(0, 0, w.features);
  DraftRequest r;
  r.k = 4;
  r.suffix = {90};
  const DraftTree t = d.draft({&r, 1}).at(0);
  const auto want = w.ref->block(w.features, {kTokens.back(), 90}, true, /*masks=*/4);
  const auto full = w.ref->block(w.features, {kTokens.back(), 90});
  ASSERT_EQ(t.size(), 4u);
  ASSERT_EQ(want.logits.size(), 4u);
  double diff = 0;
  for (size_t v = 0; v < want.logits[0].size(); ++v)
    diff = std::max(diff, std::fabs(want.logits[0][v] - full.logits[0][v]));
  EXPECT_GT(diff, 1e-3) << "the dropped rows must have mattered";
  for (int i = 0; i < 4; ++i) {
    ASSERT_GT(top2_gap(want.logits[i]), 1e-3) << "near-tie at " << i;
    EXPECT_EQ(t.tokens[i], argmax_of(want.logits[i])) << "position " << i + 1;
  }
}

TEST(DominoReference, ChunkedContextAndBatchedBlocksChangeNothing) {
  World w;
  DominoBackbone bb(*w.ck, *w.target->model);
  KvCache kv(bb.kv_config(512));
  const SeqId once = kv.create(), chunked = kv.create();
  bb.append_context(kv, once, 0, w.features);
  const int64_t f = 512;  // feature row width
  int64_t from = 0;
  for (int64_t n : {5, 1, 6}) {
    bb.append_context(kv, chunked, from, {w.features.data() + from * f, static_cast<size_t>(n * f)});
    from += n;
  }
  // Three blocks in one pass: the two caches, and a shorter context visible with a suffix.
  std::vector<DominoBackbone::Block> blocks = {{once, 12, {kTokens.back()}, 7},
                                               {chunked, 12, {kTokens.back()}, 7},
                                               {once, 9, {101, 44, 250, 17}, 5}};
  const auto all = bb.forward(kv, blocks);
  for (size_t b = 0; b < blocks.size(); ++b) {
    const auto one = bb.forward(kv, {&blocks[b], 1});
    const size_t rows = blocks[b].n_out;
    EXPECT_LT(rel_err(all.logits.data() + all.offset[b] * 261, one.logits.data(), rows * 261), 2e-5)
        << "block " << b;
    EXPECT_LT(rel_err(all.hidden.data() + all.offset[b] * 256, one.hidden.data(), rows * 256), 2e-5)
        << "block " << b;
  }
  EXPECT_LT(rel_err(all.logits.data(), all.logits.data() + 7 * 261, 7 * 261), 2e-5);  // chunked
  // The shorter context is the reference's block over the first 9 positions' features.
  const auto want = w.ref->block({w.features.begin(), w.features.begin() + 9 * f}, {101, 44, 250, 17});
  for (int i = 0; i < 5; ++i)
    EXPECT_LT(rel_err(all.logits.data() + (all.offset[2] + i) * 261, want.logits[i]), 1e-4);
  EXPECT_EQ(kv.length(once), 12);
  EXPECT_EQ(kv.pages_in_use(), 2);  // forks released: one 16-position page per sequence
}

TEST(DominoReference, FeatureBookkeeping) {
  World w;
  auto d = w.drafter(/*head=*/false);
  EXPECT_EQ(d->context_entries(0), 12);
  DraftRequest r;
  r.k = 7;
  const DraftTree before = d->draft({&r, 1}).at(0);
  // Re-delivered positions replace the old entries; the drafts do not change.
  d->set_features(0, 4, {w.features.data() + 4 * 512, 8 * 512});
  EXPECT_EQ(d->context_entries(0), 12);
  EXPECT_EQ(d->draft({&r, 1}).at(0).tokens, before.tokens);
  // A gap, or features for tokens never committed, are caller errors.
  EXPECT_THROW(d->set_features(0, 13, {w.features.data(), 512}), Error);
  EXPECT_THROW(d->set_features(0, 12, {w.features.data(), 2 * 512}), Error);
  EXPECT_THROW(d->set_features(0, 0, {w.features.data(), 100}), Error);
  DraftRequest unknown = r;
  unknown.seq = 5;
  EXPECT_THROW(d->draft({&unknown, 1}), Error);
  // When every token has features, the last one is still the anchor (hidden from the context).
  std::vector<int32_t> twelve(kTokens.begin(), kTokens.end() - 1);
  d->start(1, twelve);
  d->set_features(1, 0, w.features);
  r.seq = 1;
  const DraftTree t = d->draft({&r, 1}).at(0);
  const auto want =
      w.ref->block({w.features.begin(), w.features.begin() + 11 * 512}, {twelve.back()});
  for (int i = 0; i < 7; ++i) {
    ASSERT_GT(top2_gap(want.logits[i]), 1e-3) << "near-tie at " << i;
    EXPECT_EQ(t.tokens[i], argmax_of(want.logits[i])) << "position " << i + 1;
  }
}

TEST(DominoReference, FeaturesWaitForTheNextDraftAndDraftTheSame) {
  // Features delivered in pieces, the last ones re-delivered, wait until a draft needs them (no
  // backbone pass before: the cache is untouched), then give the drafts of one delivery.
  World w;
  const int64_t f = 512;
  auto once = w.drafter(/*head=*/true);
  DominoOptions o;
  o.path = w.path;
  DominoDrafter pieces(*w.target->model, o);
  pieces.start(0, kTokens);
  pieces.set_features(0, 0, {w.features.data(), static_cast<size_t>(5 * f)});
  pieces.set_features(0, 5, {w.features.data() + 5 * f, static_cast<size_t>(4 * f)});
  pieces.set_features(0, 7, {w.features.data() + 7 * f, static_cast<size_t>(5 * f)});
  EXPECT_EQ(pieces.context_entries(0), 12);
  EXPECT_EQ(pieces.kv_cache().length(0), 0) << "no backbone pass before a draft";
  DraftRequest r;
  r.k = 7;
  const DraftTree a = once->draft({&r, 1}).at(0), b = pieces.draft({&r, 1}).at(0);
  EXPECT_EQ(pieces.kv_cache().length(0), 12);
  EXPECT_EQ(a.tokens, b.tokens);
  // A request of length 0 drafts nothing and leaves waiting features waiting.
  pieces.commit(0, std::vector<int32_t>{7});
  pieces.set_features(0, 12, {w.features.data(), static_cast<size_t>(f)});
  r.k = 0;
  pieces.draft({&r, 1});
  EXPECT_EQ(pieces.kv_cache().length(0), 12);
  EXPECT_EQ(pieces.context_entries(0), 13);
}

TEST(DominoReference, HeadWalkMatchesFloat64Reference) {
  World w;
  DominoBackbone bb(*w.ck, *w.target->model);
  DominoHead head(*w.ck, *w.target->model);
  KvCache kv(bb.kv_config(256));
  const SeqId s = kv.create();
  bb.append_context(kv, s, 0, w.features);
  DominoBackbone::Block blk{s, 12, {kTokens.back()}, 7};
  const auto res = bb.forward(kv, {&blk, 1});
  DominoChain c;
  c.base = res.logits.data();
  c.hidden = res.hidden.data();
  c.anchor = kTokens.back();
  c.k = 7;
  // Two chains in one walk, the second shorter, to exercise the batched walk.
  DominoChain c2 = c;
  c2.k = 4;
  std::vector<std::vector<float>> finals;
  const auto trees = head.walk(std::vector<DominoChain>{c, c2}, true, &finals);
  const auto want = w.ref->walk(res.logits.data(), res.hidden.data(), kTokens.back(), 7);
  ASSERT_EQ(trees[0].size(), 7u);
  ASSERT_EQ(trees[1].size(), 4u);
  int changed = 0;  // positions where the head overrules the base argmax
  for (int i = 0; i < 7; ++i) {
    ASSERT_GT(top2_gap(want.logits[i]), 1e-3) << "near-tie at " << i;
    EXPECT_LT(rel_err(finals[0].data() + i * 261, want.logits[i]), 1e-4) << "position " << i + 1;
    EXPECT_EQ(trees[0].tokens[i], want.tokens[i]) << "position " << i + 1;
    EXPECT_EQ(trees[0].parents[i], i - 1);
    EXPECT_EQ(trees[0].q[i].tokens.size(), 1u);  // greedy: one-hot q
    if (i < 4) {
      EXPECT_EQ(trees[1].tokens[i], want.tokens[i]);
    }
    changed += want.tokens[i] != argmax(res.logits.data() + i * 261, 261);
  }
  EXPECT_GT(changed, 0) << "the random head never changes a choice: the test would be vacuous";
}

// A draft vocabulary (every third id): the backbone scores only those ids, each with the full
// head's logit for that id (the same target rows), the head walks over them, and the drafted
// tokens are target ids inside the set. The random checkpoint draws head.w2 last, so every other
// tensor equals the full-vocabulary World's (same seed) and the base logits can be compared.
TEST(DominoReference, DraftVocabularyScoresOnlyItsIds) {
  std::vector<int32_t> ids;
  for (int32_t t = 0; t < 261; t += 3) ids.push_back(t);
  const int64_t dv = static_cast<int64_t>(ids.size());
  World w(ids), full;
  DominoBackbone bb(*w.ck, *w.target->model), bb_full(*full.ck, *full.target->model);
  KvCache kv(bb.kv_config(256)), kv_full(bb_full.kv_config(256));
  const SeqId s = kv.create(), s_full = kv_full.create();
  bb.append_context(kv, s, 0, w.features);
  bb_full.append_context(kv_full, s_full, 0, full.features);
  DominoBackbone::Block blk{s, 12, {kTokens.back()}, 7}, blk_full{s_full, 12, {kTokens.back()}, 7};
  const auto res = bb.forward(kv, {&blk, 1});
  const auto res_full = bb_full.forward(kv_full, {&blk_full, 1});
  ASSERT_EQ(res.logits.size(), static_cast<size_t>(7 * dv));
  const auto want = w.ref->block(w.features, {kTokens.back()});
  for (int i = 0; i < 7; ++i) {
    EXPECT_LT(rel_err(res.logits.data() + i * dv, want.logits[i]), 1e-4) << "position " << i + 1;
    std::vector<float> picked;  // the full head's logits at the draft ids
    for (int32_t id : ids) picked.push_back(res_full.logits[i * 261 + id]);
    EXPECT_LT(rel_err(res.logits.data() + i * dv, picked.data(), dv), 1e-6) << "position " << i + 1;
  }
  DominoHead head(*w.ck, *w.target->model);
  DominoChain c;
  c.base = res.logits.data();
  c.hidden = res.hidden.data();
  c.anchor = kTokens.back();
  c.k = 7;
  std::vector<std::vector<float>> finals;
  const auto trees = head.walk({&c, 1}, true, &finals);
  const auto walk = w.ref->walk(res.logits.data(), res.hidden.data(), kTokens.back(), 7);
  ASSERT_EQ(trees[0].size(), 7u);
  for (int i = 0; i < 7; ++i) {
    EXPECT_EQ(trees[0].tokens[i], walk.tokens[i]) << "position " << i + 1;
    EXPECT_TRUE(std::binary_search(ids.begin(), ids.end(), trees[0].tokens[i]));
    for (int32_t t = 0; t < 261; ++t) {
      const float got = finals[0][i * 261 + t];
      if (t % 3 != 0) {
        EXPECT_TRUE(std::isinf(got) && got < 0) << "id " << t << " outside the draft vocabulary";
      } else {
        EXPECT_NEAR(got, walk.logits[i][t], 1e-4 * (1 + std::abs(walk.logits[i][t])));
      }
    }
  }
  // A malformed draft vocabulary is refused when the checkpoint opens.
  test::DominoSpec bad = test::tiny_domino_spec();
  bad.cfg.draft_vocab = {5, 3};
  TempDir tmp;
  const std::string bad_path = test::write_domino(bad, tmp.file("bad.safetensors"));
  try {
    DominoCheckpoint::open(bad_path);
    ADD_FAILURE() << "a decreasing draft vocabulary was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("strictly increasing"), std::string::npos) << e.what();
  }
}

// Several requests in one draft() call (SSD drafts all its branches so) with a draft vocabulary:
// each chain reads its own block's [k, Vd] base logits, so the batched trees equal the trees of
// one request at a time, with the head and without it.
TEST(DominoReference, DraftVocabularyBatchedRequestsEqualSingleOnes) {
  std::vector<int32_t> ids;
  for (int32_t t = 0; t < 261; t += 3) ids.push_back(t);
  World w(ids);
  for (bool head : {false, true}) {
    auto d = w.drafter(head);
    std::vector<DraftRequest> rs(3);
    rs[0].k = 7;
    rs[1].k = 5;
    rs[1].suffix = {90, 3};
    rs[2].k = 7;
    rs[2].suffix = {18};
    const std::vector<DraftTree> all = d->draft(rs);
    ASSERT_EQ(all.size(), 3u);
    for (size_t i = 0; i < rs.size(); ++i) {
      const DraftTree one = d->draft({&rs[i], 1}).at(0);
      ASSERT_EQ(all[i].size(), static_cast<size_t>(rs[i].k)) << "request " << i;
      EXPECT_EQ(all[i].tokens, one.tokens) << "request " << i << (head ? " (head)" : " (no head)");
    }
  }
}

TEST(DominoReference, HeadOffDraftsArgmaxOfBaseLogits) {
  World w;
  auto d = w.drafter(/*head=*/false);
  EXPECT_EQ(d->name(), "domino-nohead");
  DraftRequest r;
  r.k = 7;
  const DraftTree t = d->draft({&r, 1}).at(0);
  const auto want = w.ref->block(w.features, {kTokens.back()});
  ASSERT_EQ(t.size(), 7u);
  for (int i = 0; i < 7; ++i) {
    ASSERT_GT(top2_gap(want.logits[i]), 1e-3) << "near-tie at " << i;
    EXPECT_EQ(t.tokens[i], argmax_of(want.logits[i])) << "position " << i + 1;
  }
  // Deeper than the block allows: capped at B - 1 = 7. Zero depth: an empty tree.
  r.k = 12;
  EXPECT_EQ(d->draft({&r, 1}).at(0).size(), 7u);
  r.k = 0;
  EXPECT_TRUE(d->draft({&r, 1}).at(0).empty());
}

TEST(DominoReference, SampledDraftCarriesSoftmaxOfFinalLogits) {
  World w;
  auto d = w.drafter(/*head=*/true);
  DraftRequest r;
  r.k = 5;
  r.sampler.temperature = 0.8f;
  r.sampler.seed = 1234;
  r.stream = 3;
  r.position = 40;
  const DraftTree t = d->draft({&r, 1}).at(0);
  ASSERT_EQ(t.size(), 5u);
  EXPECT_EQ(d->draft({&r, 1}).at(0).tokens, t.tokens);  // same address, same draws
  // The reference walk fed the drafted tokens: its final logits at each position, from the
  // same base logits and hidden states (an independent backbone pass on its own cache).
  DominoBackbone bb(*w.ck, *w.target->model);
  KvCache kv(bb.kv_config(256));
  const SeqId s = kv.create();
  bb.append_context(kv, s, 0, w.features);
  DominoBackbone::Block blk{s, 12, {kTokens.back()}, 5};
  const auto res = bb.forward(kv, {&blk, 1});
  const auto want = w.ref->walk(res.logits.data(), res.hidden.data(), kTokens.back(), 5, &t.tokens);
  for (int i = 0; i < 5; ++i) {
    std::vector<double> p(261);
    const double mx = *std::max_element(want.logits[i].begin(), want.logits[i].end());
    double z = 0;
    for (int v = 0; v < 261; ++v) z += (p[v] = std::exp((want.logits[i][v] - mx) / 0.8));
    double err = 0;
    for (int v = 0; v < 261; ++v) err = std::max(err, std::abs(t.q[i].prob_of(v) - p[v] / z));
    EXPECT_LT(err, 1e-4) << "position " << i + 1;
    // The drafted token is the inverse-CDF draw of q at the drafter's own Philox address.
    EXPECT_EQ(t.tokens[i], sample(t.q[i], philox_uniform(1234, 3, 40 + i, kLaneDominoDraft)));
  }
}

}  // namespace
}  // namespace ssd
