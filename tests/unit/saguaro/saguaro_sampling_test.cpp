// Saguaro sampling (runtime/saguaro/saguaro_sampling.h):
//   - the reshape itself: sums to 1, the exact scale factors, C = 1 / F = 0 / F >= support are the
//     identity, bad C refused;
//   - every drafter that samples (model, oracle, early exit, Domino) draws from the reshaped q and
//     carries it, while DraftTree::predicted keeps the q before the reshape;
//   - exactness: sampled SD with Saguaro sampling (C = 0.3) on a tiny target with a tiny draft
//     model emits its first two tokens with the target's law (the chi-square fit of
//     tests/unit/spec/chi_square.h, alpha = 1e-4), drafting through DraftRequest::suffix as
//     pre-speculation does; the same trials verified against the un-reshaped q (a deliberately
//     wrong verifier input) fail the fit, so the test has teeth;
//   - the point of it: the rate at which the round's outcome (k, bonus) is among the predicted
//     outcomes (F = 1 per position) rises as C falls.
//
// Tolerances: reshape identities in double over <= 261 entries hold to 1e-12; q's of a drafter's
// node against the reshape of its own predicted list are the same arithmetic on the same numbers
// (1e-12).
#include "runtime/saguaro/saguaro_sampling.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>

#include "runtime/core/error.h"
#include "runtime/drafters/domino/domino_drafter.h"
#include "runtime/drafters/early_exit_drafter.h"
#include "runtime/drafters/model_drafter.h"
#include "runtime/drafters/oracle_drafter.h"
#include "runtime/saguaro/outcome_prediction.h"
#include "runtime/spec/verify.h"
#include "tests/support/domino_writer.h"
#include "tests/support/temp_dir.h"
#include "tests/unit/spec/chi_square.h"
#include "tests/unit/spec/drafting_fixture.h"

namespace ssd {
namespace {

using test::TempDir;
using test::drafting::Engine;
using test::drafting::gguf_vocab;

ProcessedDist dist(std::vector<std::pair<int32_t, double>> entries) {
  ProcessedDist d;
  for (auto [id, p] : entries) d.tokens.push_back(TokenProb{id, p});
  return d;
}

double total(const ProcessedDist& d) {
  double s = 0;
  for (const TokenProb& t : d.tokens) s += t.prob;
  return s;
}

TEST(SaguaroReshape, ScalesTheTopFAndRenormalises) {
  const ProcessedDist q = dist({{4, 0.4}, {1, 0.3}, {7, 0.2}, {2, 0.1}});
  for (const double c : {0.05, 0.3, 0.7}) {
    for (const int32_t f : {1, 2, 3}) {
      const ProcessedDist r = saguaro_reshape(q, f, c);
      ASSERT_EQ(r.size(), q.size());
      EXPECT_NEAR(total(r), 1.0, 1e-12);
      double top = 0;
      for (int32_t i = 0; i < f; ++i) top += q.tokens[i].prob;
      const double z = 1 - (1 - c) * top;
      for (int32_t i = 0; i < static_cast<int32_t>(q.size()); ++i) {
        const TokenProb& t = q.tokens[i];
        const double want = (i < f ? c : 1.0) * t.prob / z;
        EXPECT_NEAR(r.prob_of(t.id), want, 1e-12) << "token " << t.id << " c " << c << " f " << f;
      }
      for (size_t i = 1; i < r.size(); ++i)  // process() order: probability descending
        EXPECT_GE(r.tokens[i - 1].prob, r.tokens[i].prob);
    }
  }
}

TEST(SaguaroReshape, IdentityCasesAndBadC) {
  const ProcessedDist q = dist({{4, 0.5}, {1, 0.3}, {7, 0.2}});
  for (const auto& r : {saguaro_reshape(q, 2, 1.0), saguaro_reshape(q, 0, 0.5),
                        saguaro_reshape(q, 3, 0.5), saguaro_reshape(q, 9, 0.5)}) {
    ASSERT_EQ(r.size(), q.size());
    for (size_t i = 0; i < q.size(); ++i) {
      EXPECT_EQ(r.tokens[i].id, q.tokens[i].id);
      EXPECT_EQ(r.tokens[i].prob, q.tokens[i].prob);  // bit for bit: untouched
    }
  }
  EXPECT_THROW(saguaro_reshape(q, 1, 0.0), Error);
  EXPECT_THROW(saguaro_reshape(q, 1, 1.5), Error);
  DraftRequest r;
  r.sampler.temperature = 1;
  r.saguaro_top_f = {2, 0, 3};
  r.saguaro_c = 0.5;
  EXPECT_EQ(saguaro_top_f_at(r, 1), 2);
  EXPECT_EQ(saguaro_top_f_at(r, 2), 0);
  EXPECT_EQ(saguaro_top_f_at(r, 3), 3);
  EXPECT_EQ(saguaro_top_f_at(r, 4), 0);  // past the list
  r.sampler.temperature = 0;
  EXPECT_EQ(saguaro_top_f_at(r, 1), 0);  // greedy drafts ignore it
}

// ---- drafters apply it ----

struct Targets {
  TempDir tmp;
  std::string target_path, draft_path;
  std::unique_ptr<Engine> target;
  explicit Targets(bool domino_size = false) {
    test::TinyModelSpec t =
        domino_size ? test::tiny_spec(Arch::Llama, DType::F32) : test::drafting::small_spec();
    target_path = test::write_tiny_gguf(t, tmp.file("target.gguf"));
    test::TinyModelSpec d = t;
    d.n_layers = 1;
    draft_path = test::write_tiny_gguf(d, tmp.file("draft.gguf"));
    target = std::make_unique<Engine>(target_path);
  }
  std::unique_ptr<ModelDrafter> model_drafter() {
    ModelFile f = ModelFile::open(draft_path);
    ModelDrafterOptions o;
    o.target_vocab = gguf_vocab(target->file);
    o.draft_vocab = gguf_vocab(f);
    o.target_logits = target->vocab();
    return std::make_unique<ModelDrafter>(std::move(f), *target->backend, o);
  }
};

DraftRequest saguaro_request(int32_t k, std::vector<int32_t> top_f, double c) {
  DraftRequest r;
  r.seq = 0;
  r.k = k;
  r.sampler.temperature = 1.0f;
  r.sampler.seed = 21;
  r.stream = 3;
  r.position = 9;
  r.saguaro_top_f = std::move(top_f);
  r.saguaro_c = c;
  r.predict_top = 1000;  // more than the vocabulary: predicted is the whole q before the reshape
  return r;
}

// Each node's q is the reshape of its own pre-reshape q (predicted), with the F of its depth.
void expect_reshaped(const DraftTree& t, const DraftRequest& r, const std::string& who) {
  ASSERT_FALSE(t.empty()) << who;
  ASSERT_EQ(t.predicted.size(), t.size()) << who;
  for (size_t i = 0; i < t.size(); ++i) {
    const int32_t depth = t.depth(static_cast<int32_t>(i));
    const int32_t f = saguaro_top_f_at(r, depth);
    EXPECT_NEAR(total(t.predicted[i]), 1.0, 1e-9) << who << ": predicted is the whole q";
    const ProcessedDist want = saguaro_reshape(t.predicted[i], f, r.saguaro_c);
    ASSERT_EQ(t.q[i].size(), want.size()) << who << " node " << i;
    for (size_t j = 0; j < want.size(); ++j) {
      EXPECT_EQ(t.q[i].tokens[j].id, want.tokens[j].id) << who << " node " << i << " entry " << j;
      EXPECT_NEAR(t.q[i].tokens[j].prob, want.tokens[j].prob, 1e-12) << who << " node " << i;
    }
    if (f > 0) {  // really changed: the top token lost probability
      const int32_t top = t.predicted[i].tokens[0].id;
      EXPECT_LT(t.q[i].prob_of(top), t.predicted[i].tokens[0].prob) << who << " node " << i;
    }
    EXPECT_GT(t.q[i].prob_of(t.tokens[i]), 0) << who << ": the token comes from its q";
  }
}

TEST(SaguaroDrafters, ModelOracleAndEarlyExitCarryTheReshapedQ) {
  Targets w;
  const std::vector<int32_t> prompt = test::drafting::kPrompts[0];
  const DraftRequest r = saguaro_request(4, {1, 3, 0, 2}, 0.3);
  {
    auto d = w.model_drafter();
    d->start(0, prompt);
    expect_reshaped(d->draft({&r, 1}).at(0), r, "model");
    DraftRequest plain = r;  // predict_top without Saguaro: predicted == q
    plain.saguaro_c = 1;
    const DraftTree t = d->draft({&plain, 1}).at(0);
    ASSERT_EQ(t.predicted.size(), t.size());
    for (size_t i = 0; i < t.size(); ++i) EXPECT_EQ(t.predicted[i].size(), t.q[i].size());
    DraftRequest none = r;  // no predict_top: no predicted lists
    none.predict_top = 0;
    EXPECT_TRUE(d->draft({&none, 1}).at(0).predicted.empty());
  }
  {
    OracleOptions o;
    o.alpha = 0.5;
    OracleDrafter d(*w.target->model, o);
    d.start(0, prompt);
    expect_reshaped(d.draft({&r, 1}).at(0), r, "oracle");
  }
  {
    EarlyExitOptions o;
    o.layers = 1;
    EarlyExitDrafter d(w.target->file, *w.target->backend, o);
    d.start(0, prompt);
    expect_reshaped(d.draft({&r, 1}).at(0), r, "early-exit");
  }
}

TEST(SaguaroDrafters, DominoCarriesTheReshapedQ) {
  Targets w(/*domino_size=*/true);
  DominoOptions o;
  o.path = test::write_domino(test::tiny_domino_spec(), w.tmp.file("d.safetensors"));
  DominoDrafter d(*w.target->model, o);
  d.start(0, test::drafting::kPrompts[0]);
  DraftRequest r = saguaro_request(4, {1, 3, 0, 2}, 0.3);
  r.suffix = {17, 3};  // a hypothetical outcome, as pre-speculation drafts
  expect_reshaped(d.draft({&r, 1}).at(0), r, "domino");
}

// ---- exactness of sampled SD with Saguaro sampling, and the hit rate ----

// A tiny target and its 1-layer draft, with the target's logits after prompt + extra memoised.
struct Trials {
  Targets w;
  std::unique_ptr<ModelDrafter> drafter;
  std::vector<int32_t> prompt = test::drafting::kPrompts[1];
  std::map<std::vector<int32_t>, std::vector<float>> rows;  // extra tokens -> target logits [V]
  SamplerConfig sampler;

  Trials() {
    drafter = w.model_drafter();
    drafter->start(0, prompt);
    sampler.temperature = 1.0f;
    sampler.top_k = 4;  // both sides processed alike: 4 x 4 cells for the pair law
    sampler.seed = 1234;
  }
  const std::vector<float>& row(const std::vector<int32_t>& extra) {
    auto it = rows.find(extra);
    if (it != rows.end()) return it->second;
    KvCache& kv = *w.target->kv;
    const SeqId s = kv.create();
    std::vector<int32_t> all = prompt;
    all.insert(all.end(), extra.begin(), extra.end());
    ForwardResult fr = w.target->model->forward(Batch::sequence(s, all, 0), kv);
    kv.release(s);
    return rows.emplace(extra, std::move(fr.logits)).first->second;
  }
  ProcessedDist p(const std::vector<int32_t>& extra) {
    return process(row(extra).data(), w.target->vocab(), sampler);
  }

  struct Round {
    DraftTree tree;  // the K = 2 chain verified
    std::vector<ProcessedDist> predicted;
    VerifyResult v;
  };
  // One SD round after prompt + prefix: draft K + 1 = 3 (the third position's ranking predicts
  // the bonus at k = K), verify K = 2. `wrong_q` verifies against the q before the reshape.
  Round round(const std::vector<int32_t>& prefix, uint64_t stream, double c, int32_t f,
              bool wrong_q) {
    DraftRequest r;
    r.seq = 0;
    r.suffix = prefix;
    r.k = 3;
    r.sampler = sampler;
    r.stream = stream;
    r.position = static_cast<uint32_t>(prefix.size());
    r.saguaro_top_f = {f, f};
    r.saguaro_c = c;
    r.predict_top = 4;  // = top_k: the whole processed q
    DraftTree full = drafter->draft({&r, 1}).at(0);
    Round out;
    out.predicted = full.predicted;
    for (size_t i = 0; i < std::min<size_t>(2, full.size()); ++i)
      out.tree.add(static_cast<int32_t>(i) - 1, full.tokens[i],
                   wrong_q ? full.predicted[i] : full.q[i]);
    const int32_t vocab = w.target->vocab();
    std::vector<float> logits;
    std::vector<int32_t> ext = prefix;
    for (size_t i = 0; i <= out.tree.size(); ++i) {
      const std::vector<float>& l = row(ext);
      logits.insert(logits.end(), l.begin(), l.end());
      if (i < out.tree.size()) ext.push_back(out.tree.tokens[i]);
    }
    out.v = verify_sampling(out.tree, logits.data(), vocab, sampler,
                            VerifyRng{sampler.seed, stream, static_cast<uint32_t>(prefix.size())});
    return out;
  }
  // The first two emitted tokens of a generation of SD rounds.
  std::pair<int32_t, int32_t> first_two(uint64_t stream, double c, int32_t f, bool wrong_q) {
    const Round a = round({}, stream, c, f, wrong_q);
    if (a.v.emitted.size() >= 2) return {a.v.emitted[0], a.v.emitted[1]};
    const Round b = round({a.v.emitted[0]}, stream, c, f, wrong_q);
    return {a.v.emitted[0], b.v.emitted[0]};
  }
};

spec_test::Fit pair_fit(Trials& t, int trials, double c, bool wrong_q) {
  const int32_t vocab = t.w.target->vocab();
  std::map<std::pair<int32_t, int32_t>, int64_t> seen;
  for (int i = 0; i < trials; ++i) seen[t.first_two(static_cast<uint64_t>(i), c, 1, wrong_q)]++;
  // Cells: every pair (a, b) with a in the support of p and b in the support of p(. | a), and one
  // cell of probability 0 holding every other pair observed.
  std::vector<int64_t> counts;
  std::vector<double> probs;
  int64_t covered = 0;
  const ProcessedDist p0 = t.p({});
  for (const TokenProb& a : p0.tokens) {
    const ProcessedDist p1 = t.p({a.id});
    for (const TokenProb& b : p1.tokens) {
      auto it = seen.find({a.id, b.id});
      const int64_t n = it == seen.end() ? 0 : it->second;
      counts.push_back(n);
      probs.push_back(a.prob * b.prob);
      covered += n;
    }
  }
  counts.push_back(trials - covered);
  probs.push_back(0.0);
  (void)vocab;
  return spec_test::chi_square_fit(counts, probs);
}

TEST(SaguaroExactness, SampledSdWithSaguaroFitsTheTargetLaw) {
  Trials t;
  // 8000 generations: 16 cells, the smallest expected count printed below (over 200).
  const spec_test::Fit good = pair_fit(t, 8000, 0.3, false);
  EXPECT_TRUE(good.pass()) << good.describe();
  EXPECT_EQ(good.df, 15);
  std::cout << "  Saguaro C = 0.3, F = 1: " << good.describe() << "\n";
  // Teeth: verifying the same draws against the q before the reshape is wrong and must fail.
  const spec_test::Fit bad = pair_fit(t, 8000, 0.3, true);
  EXPECT_FALSE(bad.pass()) << bad.describe();
  std::cout << "  same draws judged against the un-reshaped q: " << bad.describe() << "\n";
}

TEST(SaguaroExactness, HitRateRisesAsCFalls) {
  Trials t;
  const int trials = 3000;
  const std::vector<double> cs = {1.0, 0.5, 0.2};
  std::vector<double> rate;
  for (const double c : cs) {
    int64_t hits = 0;
    for (int i = 0; i < trials; ++i) {
      const Trials::Round r = t.round({}, 100000 + static_cast<uint64_t>(i), c, 1, false);
      const int32_t k = r.v.accepted();
      const int32_t bonus = r.v.emitted.back();
      const std::vector<int32_t> fan_out = {1, 1, 1};
      for (const PredictedOutcome& o : predict_outcomes(r.tree.tokens, r.predicted, fan_out))
        if (o.k == k && o.bonus == bonus) ++hits;
    }
    rate.push_back(static_cast<double>(hits) / trials);
    std::cout << "  C = " << c << ": outcome predicted (F = 1 per position) in " << rate.back()
              << " of " << trials << " rounds\n";
  }
  // Measured (seeded, so fixed): 0.035, 0.08, 0.22. At these rates a difference of two has a
  // standard error of about sqrt(0.035 * 0.965 / 3000 + 0.08 * 0.92 / 3000) = 0.006; a required
  // rise of 0.02 between successive C values sits over 3 standard errors below the measured rises.
  EXPECT_GT(rate[1], rate[0] + 0.02);
  EXPECT_GT(rate[2], rate[1] + 0.02);
}

}  // namespace
}  // namespace ssd
