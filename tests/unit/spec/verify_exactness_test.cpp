// Distribution exactness of sampling verification: over 100k seeded generations per case, with
// drafts really drawn from q (verify_sim.h), the first emitted token and the pair of the first
// two emitted tokens must fit the target's exact law (chi-square at alpha = 1e-4, critical values
// in chi_square.h). Cases: p = q, disjoint supports, one-hot q, sparse (top-2) q against a p with
// zeros, dense q, chains and 2-level trees with siblings drawn with and without replacement.
//
// The test is shown to have teeth: a plain dense re-implementation of the rule in this file
// (reference_verify) agrees with the real verifier trial for trial, and the same reference with
// one deliberate bug each (correction drawn from p, residual operands swapped, accept ratio
// inverted, siblings tested against p instead of the residual, residual left unnormalised) fails
// the same fits on the cases listed for it.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "chi_square.h"
#include "verify_sim.h"

namespace ssd::spec_test {
namespace {

constexpr int kTrials = 100000;          // generations per fit
constexpr int kReferenceTrials = 20000;  // generations compared trial for trial with the reference

// ---- the rule, written densely, with optional deliberate bugs ----

enum class Bug {
  kNone,
  kCorrectionFromP,       // after rejections, draw the correction from p, not the residual
  kSwappedResidual,       // residual normalise(max(0, q - r)) instead of max(0, r - q)
  kInvertedRatio,         // accept with min(1, q / r) instead of min(1, r / q)
  kSiblingsAgainstP,      // every sibling tested against p; the residual is not carried over
  kUnnormalisedResidual,  // the residual max(0, r - q) is never renormalised
};

const char* bug_name(Bug b) {
  switch (b) {
    case Bug::kNone:
      return "none";
    case Bug::kCorrectionFromP:
      return "correction_from_p";
    case Bug::kSwappedResidual:
      return "swapped_residual";
    case Bug::kInvertedRatio:
      return "inverted_ratio";
    case Bug::kSiblingsAgainstP:
      return "siblings_against_p";
    case Bug::kUnnormalisedResidual:
      return "unnormalised_residual";
  }
  return "?";
}

// Dense vectors of the reference: the test vocabularies are tiny, and fixed arrays keep
// allocation out of the 100k-trial loops.
constexpr int kMaxVocab = 16;
using Vec = std::array<double, kMaxVocab>;

Vec dense_vec(const ProcessedDist& d) {
  Vec v{};
  for (const TokenProb& t : d.tokens) v[t.id] += t.prob;
  return v;
}

// Inverse CDF over weights w (any scale) visiting ids in `order`.
int32_t draw(const Vec& w, std::span<const int32_t> order, double u) {
  double total = 0;
  for (const int32_t id : order) total += std::max(0.0, w[id]);
  const double target = u * total;
  double run = 0;
  int32_t last = -1;
  for (const int32_t id : order) {
    if (w[id] <= 0) continue;
    run += w[id];
    last = id;
    if (target < run) return id;
  }
  return last;
}

VerifyResult reference_verify(const DraftTree& tree, std::span<const ProcessedDist> p,
                              const VerifyRng& rng, Bug bug) {
  auto u_at = [&](uint32_t pos, uint32_t lane) {
    return philox_uniform(rng.seed, rng.stream, pos, lane);
  };
  VerifyResult out;
  int32_t node = -1;
  for (uint32_t depth = 0;; ++depth) {
    const uint32_t pos = rng.position + depth;
    const ProcessedDist& row = p[node + 1];
    std::array<int32_t, kMaxVocab> kids{};
    size_t n_kids = 0;
    for (size_t i = 0; i < tree.size(); ++i)
      if (tree.parents[i] == node) kids.at(n_kids++) = static_cast<int32_t>(i);
    if (n_kids == 0) {
      out.emitted.push_back(sample(row, u_at(pos, kLaneToken)));
      out.all_accepted = node >= 0;
      return out;
    }
    const Vec target = dense_vec(row);
    std::array<int32_t, kMaxVocab> order{};  // p's list order, then the ids off p's support
    size_t n_order = 0;
    for (const TokenProb& t : row.tokens) order[n_order++] = t.id;
    for (int32_t id = 0; id < kMaxVocab; ++id)
      if (target[id] == 0) order[n_order++] = id;

    Vec r = target;
    int32_t accepted = -1;
    for (uint32_t j = 0; j < n_kids; ++j) {
      const int32_t c = kids[j];
      const Vec q = dense_vec(tree.q[c]);
      const int32_t x = tree.tokens[c];
      const Vec& test = bug == Bug::kSiblingsAgainstP ? target : r;
      const double ratio =
          bug == Bug::kInvertedRatio
              ? (test[x] > 0 ? q[x] / test[x] : std::numeric_limits<double>::infinity())
              : test[x] / q[x];
      if (u_at(pos, accept_lane(j)) < std::min(1.0, ratio)) {
        accepted = c;
        break;
      }
      Vec next{};
      double sum = 0;
      for (int k = 0; k < kMaxVocab; ++k) {
        next[k] = bug == Bug::kSwappedResidual ? std::max(0.0, q[k] - test[k])
                                               : std::max(0.0, test[k] - q[k]);
        sum += next[k];
      }
      if (sum <= 1e-12) continue;  // r == q: the rejection was a rounding artefact, keep r
      if (bug != Bug::kUnnormalisedResidual)
        for (double& y : next) y /= sum;
      r = next;
    }
    if (accepted < 0) {
      out.emitted.push_back(draw(bug == Bug::kCorrectionFromP ? target : r,
                                 std::span<const int32_t>(order.data(), n_order),
                                 u_at(pos, kLaneResidual)));
      return out;
    }
    out.path.push_back(accepted);
    out.emitted.push_back(tree.tokens[accepted]);
    node = accepted;
  }
}

VerifyFn with_bug(Bug bug) {
  return [bug](const DraftTree& t, std::span<const ProcessedDist> p, const VerifyRng& r) {
    return reference_verify(t, p, r, bug);
  };
}

// ---- the cases ----

// Peakier than random_dist: weights 0.1 + u^2 (ratios up to 11), still no cell below ~0.02.
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

struct Case {
  std::string name;
  Model target, draft;
  DraftShape shape;
};

const std::vector<Case>& all_cases() {
  static const std::vector<Case> cases = [] {
    std::vector<Case> c;
    const DraftShape chain1{{1}}, chain2{{1, 1}}, chain3{{1, 1, 1}};
    {
      const Model m = peaky_model(6, 100);
      c.push_back({"p_equals_q", m, m, chain3});
    }
    c.push_back(
        {"disjoint", make_model(6, 200, [](uint64_t s) { return restricted(peaky(6, s), 0, 3); }),
         make_model(6, 300, [](uint64_t s) { return restricted(peaky(6, s), 3, 6); }), chain2});
    {
      Model onehot;  // a deterministic drafter: start proposes 2, then t -> (t + 1) % 6
      onehot.start = one_hot_dist(6, 2);
      for (int t = 0; t < 6; ++t) onehot.after.push_back(one_hot_dist(6, (t + 1) % 6));
      onehot.finish();
      c.push_back({"one_hot_q", peaky_model(6, 400), onehot, chain3});
    }
    c.push_back({"sparse_top2_q",
                 make_model(6, 500, [](uint64_t s) { return top_k(peaky(6, s), 5); }),
                 make_model(6, 600, [](uint64_t s) { return top_k(peaky(6, s), 2); }), chain2});
    c.push_back({"dense_q", peaky_model(8, 700), peaky_model(8, 800), chain1});
    c.push_back({"chain_3", peaky_model(6, 1500), peaky_model(6, 1600), chain3});
    c.push_back({"tree_3x2_without_replacement", peaky_model(6, 900), peaky_model(6, 1000),
                 DraftShape{{3, 2}, Siblings::kWithoutReplacement}});
    c.push_back({"tree_3x2_with_replacement", peaky_model(6, 1100),
                 make_model(6, 1200, [](uint64_t s) { return top_k(peaky(6, s), 3); }),
                 DraftShape{{3, 2}, Siblings::kWithReplacement}});
    // Level 2 draws 3 siblings without replacement from a top-3 q: the last one has a one-hot q.
    c.push_back({"tree_2x3_exhausts_top3",
                 make_model(6, 1300, [](uint64_t s) { return top_k(peaky(6, s), 4); }),
                 make_model(6, 1400, [](uint64_t s) { return top_k(peaky(6, s), 3); }),
                 DraftShape{{2, 3}, Siblings::kWithoutReplacement}});
    return c;
  }();
  return cases;
}

struct Fits {
  Fit first, pair;
  bool pass() const { return first.pass() && pair.pass(); }
};

Fits fits(const Case& c, const Tally& t) {
  return {chi_square_fit(t.first, c.target.start), chi_square_fit(t.pair, pair_law(c.target))};
}

const Case& find_case(const std::string& name) {
  for (const Case& c : all_cases())
    if (c.name == name) return c;
  throw std::runtime_error("no case " + name);
}

class Exactness : public ::testing::TestWithParam<size_t> {};

TEST_P(Exactness, RealVerifierFitsTargetAndMatchesReference) {
  const Case& c = all_cases()[GetParam()];
  const Tally real = generate(c.target, c.draft, c.shape, real_verify, kTrials);
  const Fits f = fits(c, real);
  EXPECT_TRUE(f.first.pass()) << c.name << " first token: " << f.first.describe();
  EXPECT_TRUE(f.pair.pass()) << c.name << " first pair: " << f.pair.describe();
  EXPECT_GE(f.first.min_expected, 5.0) << "chi-square approximation needs expected counts >= 5";
  EXPECT_GE(f.pair.min_expected, 5.0) << "chi-square approximation needs expected counts >= 5";

  // The same uniforms through the dense reference: identical outputs trial for trial (the two
  // differ only in rounding, which moves a decision with probability ~1e-15 per draw).
  const Tally ref = generate(c.target, c.draft, c.shape, with_bug(Bug::kNone), kReferenceTrials);
  const std::vector<int32_t> prefix(
      real.outputs.begin(), real.outputs.begin() + static_cast<ptrdiff_t>(ref.outputs.size()));
  EXPECT_EQ(prefix, ref.outputs) << c.name << ": verify_with_dists and the dense reference differ";
}

INSTANTIATE_TEST_SUITE_P(Cases, Exactness, ::testing::Range<size_t>(0, all_cases().size()),
                         [](const auto& info) { return all_cases()[info.param].name; });

// Each broken rule, on cases where its bug changes the output law, must fail the same fits.
// (Where it does not fail, e.g. correction-from-p on disjoint supports, whose residual is p
// itself, the bug is harmless there.)
struct Broken {
  Bug bug;
  std::string case_name;
};

const std::vector<Broken>& broken_cases() {
  static const std::vector<Broken> b = {
      {Bug::kCorrectionFromP, "one_hot_q"},
      {Bug::kCorrectionFromP, "dense_q"},
      {Bug::kCorrectionFromP, "tree_3x2_without_replacement"},
      {Bug::kSwappedResidual, "disjoint"},
      {Bug::kSwappedResidual, "dense_q"},
      {Bug::kInvertedRatio, "disjoint"},
      {Bug::kInvertedRatio, "dense_q"},
      {Bug::kSiblingsAgainstP, "tree_3x2_without_replacement"},
      {Bug::kSiblingsAgainstP, "tree_3x2_with_replacement"},
      {Bug::kUnnormalisedResidual, "tree_3x2_without_replacement"},
      {Bug::kUnnormalisedResidual, "tree_2x3_exhausts_top3"},
  };
  return b;
}

class BrokenVerifier : public ::testing::TestWithParam<size_t> {};

TEST_P(BrokenVerifier, FailsTheFit) {
  const Broken& b = broken_cases()[GetParam()];
  const Case& c = find_case(b.case_name);
  const Fits f = fits(c, generate(c.target, c.draft, c.shape, with_bug(b.bug), kTrials));
  EXPECT_FALSE(f.pass()) << bug_name(b.bug) << " on " << c.name << " passed: first "
                         << f.first.describe() << "; pair " << f.pair.describe();
}

INSTANTIATE_TEST_SUITE_P(Bugs, BrokenVerifier, ::testing::Range<size_t>(0, broken_cases().size()),
                         [](const auto& info) {
                           const Broken& b = broken_cases()[info.param];
                           return std::string(bug_name(b.bug)) + "_on_" + b.case_name;
                         });

}  // namespace
}  // namespace ssd::spec_test
