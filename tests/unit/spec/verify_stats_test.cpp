// Sampling verification: acceptance statistics against their exact values, reproducibility of
// the (seed, stream, position) addressing, the deterministic edge cases (p = q, disjoint
// supports, one-hot q, greedy target), the Residual bookkeeping itself (including its
// zero-mass and cancellation paths), and a full-size vocabulary with dense and sparse q.
//
// Tolerances: an empirical acceptance rate over N trials must be within 4 standard errors
// sqrt(a (1 - a) / N) of its exact value a (a correct verifier fails with probability ~6e-5 per
// check; the trials are seeded, so the outcome is deterministic). Chi-square fits use alpha =
// 1e-4 with the critical values of chi_square.h.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include "chi_square.h"
#include "runtime/core/error.h"
#include "runtime/spec/residual.h"
#include "verify_sim.h"

namespace ssd::spec_test {
namespace {

constexpr int kTrials = 100000;

// Fraction of first rounds (stream = trial, position 0) that accept at least one node.
double first_acceptance(const Model& target, const Model& draft, const DraftShape& shape,
                        int trials) {
  DraftTree tree;
  std::vector<ProcessedDist> rows;
  int64_t accepted = 0;
  for (int t = 0; t < trials; ++t) {
    draft_tree(draft, shape, -1, static_cast<uint64_t>(t), 0, tree);
    target_rows(target, tree, -1, rows);
    accepted += verify_with_dists(tree, rows, VerifyRng{kVerifySeed, static_cast<uint64_t>(t), 0})
                    .accepted() > 0;
  }
  return static_cast<double>(accepted) / trials;
}

void expect_rate(double observed, double exact, int trials, const char* what) {
  const double se = std::sqrt(exact * (1 - exact) / trials);
  EXPECT_LE(std::abs(observed - exact), 4 * se)
      << what << ": observed " << observed << ", exact " << exact << ", 4 SE = " << 4 * se;
}

double sum_min(const Dist& p, const Dist& q) {
  double s = 0;
  for (size_t i = 0; i < p.size(); ++i) s += std::min(p[i], q[i]);
  return s;
}

Dist residual_after(const Dist& r, const Dist& q) {
  Dist out(r.size());
  for (size_t i = 0; i < r.size(); ++i) out[i] = std::max(0.0, r[i] - q[i]);
  return normalised(out);
}

// Exact probability that every one of `width` siblings is rejected when sibling j is drawn from
// q without the tokens of siblings 0..j-1 (renormalised), by enumerating the draws.
double all_rejected_without_replacement(const Dist& r, const Dist& q, uint32_t drawn, int left) {
  if (left == 0) return 1;
  Dist qj = q;
  double mass = 0;
  for (size_t i = 0; i < q.size(); ++i) mass += (drawn >> i & 1) ? (qj[i] = 0) : qj[i];
  if (mass <= 0) return 1;  // support exhausted: no more siblings
  qj = normalised(qj);
  double total = 0;
  for (size_t x = 0; x < q.size(); ++x) {
    if (qj[x] <= 0) continue;
    const double reject = 1 - std::min(1.0, r[x] / qj[x]);
    if (reject <= 0) continue;
    total += qj[x] * reject *
             all_rejected_without_replacement(residual_after(r, qj), q, drawn | 1u << x, left - 1);
  }
  return total;
}

Dist peaky(int v, uint64_t seed) {
  Dist d(v);
  for (int i = 0; i < v; ++i) {
    const double u = philox_uniform(seed, 1, static_cast<uint32_t>(i));
    d[i] = 0.1 + u * u;
  }
  return normalised(d);
}
Model peaky_model(int v, uint64_t seed) {
  return make_model(v, seed, [v](uint64_t s) { return peaky(v, s); });
}

// ---- acceptance statistics ----

TEST(VerifyStats, ChainAcceptanceAtPosition1IsSumOfMin) {
  struct Case {
    const char* name;
    Model target, draft;
  };
  Model onehot;
  onehot.start = one_hot_dist(6, 4);
  for (int t = 0; t < 6; ++t) onehot.after.push_back(one_hot_dist(6, t));
  onehot.finish();
  const Case cases[] = {
      {"dense q", peaky_model(8, 11), peaky_model(8, 12)},
      {"top-2 q vs p with a zero",
       make_model(6, 13, [](uint64_t s) { return top_k(peaky(6, s), 5); }),
       make_model(6, 14, [](uint64_t s) { return top_k(peaky(6, s), 2); })},
      {"one-hot q", peaky_model(6, 15), onehot},
  };
  for (const Case& c : cases) {
    const double a = first_acceptance(c.target, c.draft, DraftShape{{1, 1, 1}}, kTrials);
    expect_rate(a, sum_min(c.target.start, c.draft.start), kTrials, c.name);
  }
}

TEST(VerifyStats, TreeAcceptanceWithReplacement) {
  // Three i.i.d. siblings from q: all rejected with probability prod_j sum max(0, q - r_j),
  // r_0 = p, r_{j+1} = normalise(max(0, r_j - q)).
  const Model target = peaky_model(6, 21), draft = peaky_model(6, 22);
  Dist r = target.start;
  double none = 1;
  for (int j = 0; j < 3; ++j) {
    none *= 1 - sum_min(r, draft.start);  // sum max(0, q - r) = 1 - sum min(q, r)
    r = residual_after(r, draft.start);
  }
  const double a =
      first_acceptance(target, draft, DraftShape{{3}, Siblings::kWithReplacement}, kTrials);
  expect_rate(a, 1 - none, kTrials, "3 siblings with replacement");
}

TEST(VerifyStats, TreeAcceptanceWithoutReplacement) {
  const Model target = peaky_model(6, 31),
              draft = make_model(6, 32, [](uint64_t s) { return top_k(peaky(6, s), 4); });
  const double none = all_rejected_without_replacement(target.start, draft.start, 0, 3);
  const double a =
      first_acceptance(target, draft, DraftShape{{3}, Siblings::kWithoutReplacement}, kTrials);
  expect_rate(a, 1 - none, kTrials, "3 siblings without replacement");
}

// ---- reproducibility ----

TEST(VerifyRng, SameAddressSameResultOtherAddressOtherResult) {
  const Model target = peaky_model(8, 41), draft = peaky_model(8, 42);
  const DraftShape shape{{2, 2}, Siblings::kWithoutReplacement};
  constexpr int kN = 1000;
  std::vector<DraftTree> trees;
  std::vector<std::vector<ProcessedDist>> rows;
  for (int t = 0; t < kN; ++t) {
    trees.push_back(draft_tree(draft, shape, -1, static_cast<uint64_t>(t), 0));
    rows.push_back(target_rows(target, trees.back(), -1));
  }
  auto run = [&](int t, const VerifyRng& rng) { return verify_with_dists(trees[t], rows[t], rng); };
  auto same = [](const VerifyResult& a, const VerifyResult& b) {
    return a.path == b.path && a.emitted == b.emitted && a.all_accepted == b.all_accepted;
  };
  std::vector<VerifyResult> forward;
  for (int t = 0; t < kN; ++t) forward.push_back(run(t, VerifyRng{7, 3, 11}));
  int other_seed = 0, other_stream = 0, other_position = 0;
  for (int t = kN - 1; t >= 0; --t) {  // reverse order: no state carries from call to call
    EXPECT_TRUE(same(forward[t], run(t, VerifyRng{7, 3, 11}))) << "trial " << t;
    other_seed += !same(forward[t], run(t, VerifyRng{8, 3, 11}));
    other_stream += !same(forward[t], run(t, VerifyRng{7, 4, 11}));
    other_position += !same(forward[t], run(t, VerifyRng{7, 3, 12}));
  }
  // With these models about half the trials change when the uniforms change; 200 of 1000 is
  // far below that, and above what a verifier ignoring one address field (0 changes) gives.
  EXPECT_GT(other_seed, 200);
  EXPECT_GT(other_stream, 200);
  EXPECT_GT(other_position, 200);
}

// ---- deterministic edge cases ----

TEST(VerifyEdges, PEqualsQAlwaysAccepts) {
  const Model m = peaky_model(6, 51);
  DraftTree tree;
  std::vector<ProcessedDist> rows;
  for (int t = 0; t < 20000; ++t) {
    draft_tree(m, DraftShape{{1, 1, 1}}, -1, static_cast<uint64_t>(t), 0, tree);
    target_rows(m, tree, -1, rows);
    const VerifyResult r = verify_with_dists(tree, rows, VerifyRng{1, static_cast<uint64_t>(t), 0});
    ASSERT_TRUE(r.all_accepted) << "trial " << t;
    ASSERT_EQ(r.accepted(), 3);
    // A tree whose first sibling is drawn from p itself: that sibling is always the one taken.
    draft_tree(m, DraftShape{{3}, Siblings::kWithoutReplacement}, -1, static_cast<uint64_t>(t), 0,
               tree);
    target_rows(m, tree, -1, rows);
    ASSERT_EQ(verify_with_dists(tree, rows, VerifyRng{1, static_cast<uint64_t>(t), 0}).path,
              std::vector<int32_t>{0});
  }
}

TEST(VerifyEdges, DisjointSupportsAlwaysReject) {
  const Model target = make_model(6, 61, [](uint64_t s) { return restricted(peaky(6, s), 0, 3); });
  const Model draft = make_model(6, 62, [](uint64_t s) { return restricted(peaky(6, s), 3, 6); });
  DraftTree tree;
  std::vector<ProcessedDist> rows;
  for (int t = 0; t < 20000; ++t) {
    draft_tree(draft, DraftShape{{3, 1}, Siblings::kWithoutReplacement}, -1,
               static_cast<uint64_t>(t), 0, tree);
    target_rows(target, tree, -1, rows);
    const VerifyResult r = verify_with_dists(tree, rows, VerifyRng{2, static_cast<uint64_t>(t), 0});
    ASSERT_EQ(r.accepted(), 0);
    ASSERT_EQ(r.emitted.size(), 1u);
    ASSERT_LT(r.emitted[0], 3);  // from p's support
  }
}

TEST(VerifyEdges, RejectedOneHotDraftIsNeverTheCorrection) {
  // q one-hot at 2, p(2) < 1: accepted with probability p(2); after a rejection the residual
  // has r(2) = 0, so the correction is never 2.
  const Dist p = peaky(6, 71);
  DraftTree tree;
  tree.add(-1, 2, one_hot(2));
  const std::vector<ProcessedDist> rows{processed(p), processed(p)};
  int64_t accepted = 0;
  for (int t = 0; t < kTrials; ++t) {
    const VerifyResult r = verify_with_dists(tree, rows, VerifyRng{3, static_cast<uint64_t>(t), 0});
    if (r.accepted() > 0) {
      ++accepted;
    } else {
      ASSERT_NE(r.emitted[0], 2);
    }
  }
  expect_rate(static_cast<double>(accepted) / kTrials, p[2], kTrials, "one-hot q");
}

TEST(VerifyEdges, GreedyTargetIsDeterministic) {
  // p one-hot (temperature 0) against a dense drafter: the output is the target's argmax chain
  // whatever was drafted and whatever the uniforms.
  const int v = 6;
  Model target;  // after token t, always next_of[t]
  target.start = one_hot_dist(v, 0);
  const int next_of[v] = {3, 4, 0, 5, 2, 1};
  for (int t = 0; t < v; ++t) target.after.push_back(one_hot_dist(v, next_of[t]));
  target.finish();
  const Model draft = peaky_model(v, 81);
  const DraftShape shape{{2, 2}, Siblings::kWithoutReplacement};
  for (int t = 0; t < 5000; ++t) {
    const DraftTree tree = draft_tree(draft, shape, 3, static_cast<uint64_t>(t), 0);
    const VerifyResult r = verify_with_dists(tree, target_rows(target, tree, 3),
                                             VerifyRng{4, static_cast<uint64_t>(t), 0});
    int32_t expect = 3;
    for (const int32_t tok : r.emitted) {
      expect = next_of[expect];
      ASSERT_EQ(tok, expect) << "trial " << t;
    }
  }
}

// ---- the residual itself ----

ProcessedDist dist(std::vector<TokenProb> t) {
  ProcessedDist d;
  d.tokens = std::move(t);
  return d;
}

TEST(Residual, RejectionsFollowTheFormula) {
  Residual r;
  r.reset(dist({{0, 0.5}, {1, 0.3}, {2, 0.2}}));
  EXPECT_TRUE(r.accepts(0, 0.5, 0.999999));  // r(0) = q(0): always
  EXPECT_FALSE(r.accepts(0, 0.6, 0.84));     // r / q = 0.8333
  EXPECT_TRUE(r.accepts(0, 0.6, 0.83));
  EXPECT_FALSE(r.accepts(7, 0.5, 0.0));  // off p's support: never
  // max(0, p - q) with q = {0: 0.6, 3: 0.4} = {1: 0.3, 2: 0.2} -> {1: 0.6, 2: 0.4}
  EXPECT_TRUE(r.reject(dist({{0, 0.6}, {3, 0.4}})));
  EXPECT_DOUBLE_EQ(r.prob(0), 0.0);
  EXPECT_NEAR(r.prob(1), 0.6, 1e-15);
  EXPECT_NEAR(r.prob(2), 0.4, 1e-15);
  EXPECT_EQ(r.sample(0.59), 1);
  EXPECT_EQ(r.sample(0.61), 2);
  // The accept test scales by the residual's mass: r(1) / q(1) = 0.6 / 0.75 = 0.8.
  EXPECT_TRUE(r.accepts(1, 0.75, 0.79));
  EXPECT_FALSE(r.accepts(1, 0.75, 0.81));
  // Rejecting a one-hot at 1 leaves {2: 1}.
  EXPECT_TRUE(r.reject(one_hot(1)));
  EXPECT_NEAR(r.prob(2), 1.0, 1e-15);
  EXPECT_EQ(r.sample(0.0), 2);
  EXPECT_EQ(r.sample(1.0 - 0x1.0p-53), 2);
}

TEST(Residual, ZeroMassKeepsTheResidual) {
  // r == q: a rejection could only be a rounding artefact; nothing would be left, so the
  // residual stays as it was.
  Residual r;
  const ProcessedDist p = dist({{4, 0.25}, {9, 0.75}});
  r.reset(p);
  EXPECT_FALSE(r.reject(p));
  EXPECT_DOUBLE_EQ(r.prob(4), 0.25);
  EXPECT_DOUBLE_EQ(r.prob(9), 0.75);
  EXPECT_EQ(r.sample(0.2), 4);
  EXPECT_EQ(r.sample(0.3), 9);
}

TEST(Residual, SmallResidualMassIsResummed) {
  // p(0) = 1 - 1e-6 removed by q = one-hot(0): the mass left, 1e-6, computed by subtraction
  // would carry a relative error ~3e-11 (1 - 0.999999 is not exact); it is summed afresh, so
  // the residual is exactly one-hot.
  Residual r;
  r.reset(dist({{0, 1 - 1e-6}, {1, 1e-6}}));
  EXPECT_TRUE(r.reject(one_hot(0)));
  EXPECT_EQ(r.prob(1), 1.0);
  EXPECT_TRUE(r.accepts(1, 1.0, 1.0 - 0x1.0p-53));
}

TEST(Residual, LargeIdsAndReuse) {
  Residual r;
  r.reset(dist({{49151, 0.5}, {3, 0.3}, {1000, 0.2}}));
  // q's ids beyond anything seen (60000) or off p's support are no mass to remove.
  EXPECT_TRUE(r.reject(dist({{60000, 0.5}, {49151, 0.25}, {5, 0.25}})));
  EXPECT_NEAR(r.prob(49151), 0.25 / 0.75, 1e-15);
  EXPECT_EQ(r.prob(60000), 0.0);
  // A new p forgets the old ids.
  r.reset(dist({{7, 1.0}}));
  EXPECT_EQ(r.prob(49151), 0.0);
  EXPECT_EQ(r.prob(7), 1.0);
}

TEST(Residual, RefusesBadDistributions) {
  Residual r;
  EXPECT_THROW(r.reset(ProcessedDist{}), Error);
  EXPECT_THROW(r.reset(dist({{1, 0.5}, {1, 0.5}})), Error);  // a repeated id
  EXPECT_THROW(r.reset(dist({{1, 0.5}, {2, 0.4}})), Error);  // sums to 0.9
  EXPECT_THROW(r.reset(dist({{-1, 1.0}})), Error);
  r.reset(dist({{1, 0.5}, {2, 0.5}}));  // still usable after the refusals
  EXPECT_EQ(r.prob(1), 0.5);
  EXPECT_THROW(r.sample(1.0), Error);
}

// ---- a full-size vocabulary ----

TEST(VerifyLargeVocab, FirstTokenFitsAndAcceptanceMatches) {
  // p: top-2000 of random logits over 49152 ids; q dense (all 49152 ids) or sparse (top-5 of
  // other logits). The target is context-free (every row is p), so the first emitted token has
  // law p; it is checked over 10 bins of p's list order holding ~10% of the mass each (2500
  // trials: expected counts ~250). Tokens off p's support count as impossible.
  const int32_t vocab = 49152;
  auto logits = [&](uint64_t seed) {
    std::vector<float> l(vocab);
    for (int32_t i = 0; i < vocab; ++i)
      l[i] = static_cast<float>(4 * philox_uniform(seed, 5, static_cast<uint32_t>(i)));
    return l;
  };
  const ProcessedDist p =
      process(logits(91).data(), vocab, SamplerConfig{.temperature = 1, .top_k = 2000});
  const ProcessedDist q_dense = process(logits(92).data(), vocab, SamplerConfig{.temperature = 1});
  const ProcessedDist q_sparse =
      process(logits(93).data(), vocab, SamplerConfig{.temperature = 0.5, .top_k = 5});
  ASSERT_EQ(p.size(), 2000u);
  ASSERT_EQ(q_dense.size(), static_cast<size_t>(vocab));

  // Bins of p's order: bin_of[id] (-1 off p's support), and each bin's exact mass.
  std::vector<int> bin_of(vocab, -1);
  std::vector<double> bin_mass(10, 0.0);
  double run = 0;
  for (const TokenProb& t : p.tokens) {
    const int b = std::min(9, static_cast<int>(run * 10));
    bin_of[t.id] = b;
    bin_mass[b] += t.prob;
    run += t.prob;
  }

  for (const ProcessedDist* q : {&q_dense, &q_sparse}) {
    std::vector<double> cdf;  // q's running sum in list order, for fast exact drafting
    double s = 0;
    for (const TokenProb& t : q->tokens) cdf.push_back(s += t.prob);
    auto draw = [&](double u) {
      const size_t i = std::upper_bound(cdf.begin(), cdf.end(), u * s) - cdf.begin();
      return q->tokens[std::min(i, cdf.size() - 1)].id;
    };
    const std::vector<ProcessedDist> rows(3, p);
    DraftTree tree;  // a chain of 2 built once (q is large); each trial redraws its tokens
    tree.add(-1, q->tokens[0].id, *q);
    tree.add(0, q->tokens[0].id, *q);
    constexpr int kN = 2500;
    std::vector<int64_t> counts(11, 0);  // 10 bins + off-support
    int64_t accepted = 0;
    for (int t = 0; t < kN; ++t) {
      tree.tokens[0] = draw(philox_uniform(kDraftSeed, t, 0, 0));
      tree.tokens[1] = draw(philox_uniform(kDraftSeed, t, 1, 0));
      const VerifyResult r =
          verify_with_dists(tree, rows, VerifyRng{9, static_cast<uint64_t>(t), 0});
      accepted += r.accepted() > 0;
      const int b = bin_of[r.emitted[0]];
      ++counts[b < 0 ? 10 : b];
    }
    std::vector<double> probs = bin_mass;
    probs.push_back(0);
    const Fit f = chi_square_fit(counts, probs);
    EXPECT_TRUE(f.pass()) << (q == &q_dense ? "dense q: " : "sparse q: ") << f.describe();
    std::vector<double> q_by_id(vocab, 0.0);
    for (const TokenProb& t : q->tokens) q_by_id[t.id] = t.prob;
    double overlap = 0;
    for (const TokenProb& t : p.tokens) overlap += std::min(t.prob, q_by_id[t.id]);
    expect_rate(static_cast<double>(accepted) / kN, overlap, kN,
                q == &q_dense ? "dense q acceptance" : "sparse q acceptance");
  }
}

}  // namespace
}  // namespace ssd::spec_test
