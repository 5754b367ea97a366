// verify_greedy on hand-made logits (chains and a branching tree, with exact expected paths and
// tokens), and the logits entry points against the core: verify_sampling at temperature 0 is
// verify_greedy, verify_sampling equals verify_with_dists over the process()ed rows, only the
// rows of visited nodes are ever read, an empty tree reproduces plain sampling, and bad input is
// refused with ssd::Error.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "runtime/core/error.h"
#include "runtime/sampling/philox.h"
#include "runtime/sampling/sampler.h"
#include "runtime/spec/verify.h"

namespace ssd {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// Logits [rows, vocab], every row NaN (argmax throws on an all-NaN row, so a row that the
// verifier should never read proves it was not read) until given an argmax.
struct Logits {
  int32_t vocab;
  std::vector<float> data;
  Logits(int32_t rows, int32_t v) : vocab(v), data(static_cast<size_t>(rows) * v, kNaN) {}
  Logits& argmax_at(int32_t row, int32_t token) {
    for (int32_t i = 0; i < vocab; ++i) data[static_cast<size_t>(row) * vocab + i] = 0.1f * i;
    data[static_cast<size_t>(row) * vocab + token] = 10;
    return *this;
  }
};

// Random logits [rows, vocab] in [-3, 3).
std::vector<float> random_logits(int32_t rows, int32_t vocab, uint64_t seed) {
  std::vector<float> l(static_cast<size_t>(rows) * vocab);
  for (size_t i = 0; i < l.size(); ++i)
    l[i] = static_cast<float>(6 * philox_uniform(seed, 7, static_cast<uint32_t>(i)) - 3);
  return l;
}

void expect_result(const VerifyResult& r, std::vector<int32_t> path, std::vector<int32_t> emitted,
                   bool all_accepted) {
  EXPECT_EQ(r.path, path);
  EXPECT_EQ(r.emitted, emitted);
  EXPECT_EQ(r.all_accepted, all_accepted);
  EXPECT_EQ(r.accepted(), static_cast<int32_t>(path.size()));
}

// ---- greedy ----

TEST(VerifyGreedy, ChainAllAcceptedEmitsTheBonus) {
  const DraftTree t = DraftTree::chain({2, 3, 1});
  Logits l(4, 5);
  l.argmax_at(0, 2).argmax_at(1, 3).argmax_at(2, 1).argmax_at(3, 4);
  expect_result(verify_greedy(t, l.data.data(), 5), {0, 1, 2}, {2, 3, 1, 4}, true);
}

TEST(VerifyGreedy, ChainStopsAtTheFirstMismatchWithTheCorrection) {
  const DraftTree t = DraftTree::chain({2, 3, 1});
  Logits l(4, 5);  // rows 2 and 3 stay NaN: below the mismatch nothing is read
  l.argmax_at(0, 2).argmax_at(1, 0);
  expect_result(verify_greedy(t, l.data.data(), 5), {0}, {2, 0}, false);
}

TEST(VerifyGreedy, FirstTokenRejected) {
  const DraftTree t = DraftTree::chain({2, 3, 1});
  Logits l(4, 5);
  l.argmax_at(0, 4);
  expect_result(verify_greedy(t, l.data.data(), 5), {}, {4}, false);
}

TEST(VerifyGreedy, EmptyTreeIsPlainArgmax) {
  Logits l(1, 5);
  l.argmax_at(0, 3);
  expect_result(verify_greedy(DraftTree{}, l.data.data(), 5), {}, {3}, false);
}

// root -> n0 (1), n1 (2), n2 (3);  n0 -> n5 (2);  n1 -> n3 (0), n4 (4);  n4 -> n6 (1)
DraftTree branching_tree() {
  DraftTree t;
  t.add(-1, 1, one_hot(1));  // 0
  t.add(-1, 2, one_hot(2));  // 1
  t.add(-1, 3, one_hot(3));  // 2
  t.add(1, 0, one_hot(0));   // 3
  t.add(1, 4, one_hot(4));   // 4
  t.add(0, 2, one_hot(2));   // 5
  t.add(4, 1, one_hot(1));   // 6
  return t;
}

TEST(VerifyGreedy, BranchingFollowsTheMatchingChildToALeaf) {
  const DraftTree t = branching_tree();
  Logits l(8, 5);
  l.argmax_at(0, 2).argmax_at(2, 4).argmax_at(5, 1).argmax_at(7, 3);  // rows: root, n1, n4, n6
  expect_result(verify_greedy(t, l.data.data(), 5), {1, 4, 6}, {2, 4, 1, 3}, true);
}

TEST(VerifyGreedy, BranchingStopsBelowAnInnerNode) {
  const DraftTree t = branching_tree();
  Logits l(8, 5);
  l.argmax_at(0, 1).argmax_at(1, 0);  // n0 accepted; its only child n5 (2) does not match 0
  expect_result(verify_greedy(t, l.data.data(), 5), {0}, {1, 0}, false);
}

TEST(VerifyGreedy, BranchingShortLeaf) {
  const DraftTree t = branching_tree();
  Logits l(8, 5);
  l.argmax_at(0, 2).argmax_at(2, 0).argmax_at(4, 3);  // n1 -> n3 (a leaf at depth 2) -> bonus
  expect_result(verify_greedy(t, l.data.data(), 5), {1, 3}, {2, 0, 3}, true);
}

TEST(VerifyGreedy, DuplicateSiblingsTakeTheFirst) {
  DraftTree t;
  t.add(-1, 2, one_hot(2));
  t.add(-1, 2, one_hot(2));
  Logits l(3, 4);
  l.argmax_at(0, 2).argmax_at(1, 1);
  expect_result(verify_greedy(t, l.data.data(), 4), {0}, {2, 1}, true);
}

// ---- the logits entry points against the core ----

// A random tree of `n` nodes over `vocab` whose tokens are drawn from q = process(draft logits).
DraftTree random_tree(int32_t n, int32_t vocab, const SamplerConfig& cfg, uint64_t seed) {
  DraftTree t;
  const std::vector<float> dl = random_logits(n, vocab, seed ^ 0xABCD);
  for (int32_t i = 0; i < n; ++i) {
    const int32_t parent =
        i == 0 ? -1 : static_cast<int32_t>(philox_uniform(seed, 1, i) * (i + 1)) - 1;
    ProcessedDist q = process(dl.data() + static_cast<size_t>(i) * vocab, vocab, cfg);
    const int32_t token = sample(q, philox_uniform(seed, 2, i));
    t.add(parent, token, std::move(q));
  }
  return t;
}

TEST(VerifySampling, TemperatureZeroIsGreedy) {
  SamplerConfig greedy;  // temperature 0
  for (uint64_t s = 0; s < 200; ++s) {
    const int32_t vocab = 7, n = 6;
    // Argmax-heavy drafts, so that long paths are common.
    const DraftTree t = random_tree(n, vocab, SamplerConfig{.temperature = 0.3f}, s);
    const std::vector<float> l = random_logits(n + 1, vocab, s + 1000);
    const VerifyResult g = verify_greedy(t, l.data(), vocab);
    const VerifyResult v = verify_sampling(t, l.data(), vocab, greedy, VerifyRng{s, 3, 9});
    EXPECT_EQ(g.path, v.path);
    EXPECT_EQ(g.emitted, v.emitted);
    EXPECT_EQ(g.all_accepted, v.all_accepted);
    // The core on one-hot rows agrees too (its rule with p one-hot reduces to argmax matching).
    std::vector<ProcessedDist> rows;
    for (int32_t r = 0; r <= n; ++r) rows.push_back(process(l.data() + r * vocab, vocab, greedy));
    const VerifyResult d = verify_with_dists(t, rows, VerifyRng{s, 3, 9});
    EXPECT_EQ(g.path, d.path);
    EXPECT_EQ(g.emitted, d.emitted);
  }
}

TEST(VerifySampling, EqualsTheCoreOverProcessedRows) {
  const SamplerConfig cfgs[] = {
      {.temperature = 0.8f},
      {.temperature = 1.2f, .top_k = 5},
      {.temperature = 1.0f, .top_p = 0.9f},
      {.temperature = 0.7f, .min_p = 0.05f},
  };
  for (const SamplerConfig& cfg : cfgs)
    for (uint64_t s = 0; s < 100; ++s) {
      const int32_t vocab = 50, n = 8;
      const DraftTree t = random_tree(n, vocab, cfg, s);
      const std::vector<float> l = random_logits(n + 1, vocab, s + 77);
      std::vector<ProcessedDist> rows;
      for (int32_t r = 0; r <= n; ++r) rows.push_back(process(l.data() + r * vocab, vocab, cfg));
      const VerifyRng rng{s * 31 + 5, s, 100};
      const VerifyResult a = verify_sampling(t, l.data(), vocab, cfg, rng);
      const VerifyResult b = verify_with_dists(t, rows, rng);
      EXPECT_EQ(a.path, b.path);
      EXPECT_EQ(a.emitted, b.emitted);
      EXPECT_EQ(a.all_accepted, b.all_accepted);
      ASSERT_EQ(a.emitted.size(), a.path.size() + 1);
      for (size_t i = 0; i < a.path.size(); ++i) {  // the path is a root-down chain of the tree
        EXPECT_EQ(t.parents[a.path[i]], i == 0 ? -1 : a.path[i - 1]);
        EXPECT_EQ(a.emitted[i], t.tokens[a.path[i]]);
      }
    }
}

TEST(VerifySampling, FullVocabularyChainEqualsTheCore) {
  // The real vocabulary size: dense p and dense q (temperature only), ids up to 49151.
  const int32_t vocab = 49152, n = 4;
  const SamplerConfig cfg{.temperature = 1.0f};
  for (uint64_t s = 0; s < 3; ++s) {
    DraftTree t;
    const std::vector<float> dl = random_logits(n, vocab, s + 500);
    for (int32_t i = 0; i < n; ++i) {
      ProcessedDist q = process(dl.data() + static_cast<size_t>(i) * vocab, vocab, cfg);
      const int32_t token = sample(q, philox_uniform(s, 2, i));
      t.add(i - 1, token, std::move(q));
    }
    const std::vector<float> l = random_logits(n + 1, vocab, s + 900);
    std::vector<ProcessedDist> rows;
    for (int32_t r = 0; r <= n; ++r)
      rows.push_back(process(l.data() + static_cast<size_t>(r) * vocab, vocab, cfg));
    const VerifyRng rng{s, 1, 0};
    const VerifyResult a = verify_sampling(t, l.data(), vocab, cfg, rng);
    const VerifyResult b = verify_with_dists(t, rows, rng);
    EXPECT_EQ(a.path, b.path);
    EXPECT_EQ(a.emitted, b.emitted);
  }
}

TEST(VerifySampling, RowsBelowRejectedChildrenAreNeverProcessed) {
  // n0 (token 0) has p = 0 at the root (logit -inf), so it is always rejected; its own row and
  // its child's row hold +inf, which process() refuses. n1 (token 1) may be accepted or not.
  const int32_t vocab = 4;
  DraftTree t;
  t.add(-1, 0, one_hot(0));  // n0
  t.add(-1, 1, one_hot(1));  // n1
  t.add(0, 2, one_hot(2));   // n2, below n0
  std::vector<float> l(4 * vocab, 0.0f);
  l[0] = -kInf;             // row 0: p(0) = 0
  l[1 * vocab + 3] = kInf;  // row 1 (n0): would throw if processed
  l[3 * vocab + 3] = kInf;  // row 3 (n2): would throw if processed
  const SamplerConfig cfg{.temperature = 1.0f};
  int accepted_n1 = 0;
  for (uint64_t s = 0; s < 200; ++s) {
    const VerifyResult r = verify_sampling(t, l.data(), vocab, cfg, VerifyRng{s, 0, 0});
    ASSERT_FALSE(r.emitted.empty());
    EXPECT_NE(r.emitted[0], 0);  // p(0) = 0 at the root
    accepted_n1 += r.path == std::vector<int32_t>{1};
  }
  EXPECT_GT(accepted_n1, 0);  // n1's row (row 2) was visited in some trials
  // A visited row with +inf is refused, which is what makes the check above meaningful.
  l[0] = kInf;
  EXPECT_THROW(verify_sampling(t, l.data(), vocab, cfg, VerifyRng{}), Error);
}

TEST(VerifySampling, EmptyTreeIsPlainSampling) {
  const int32_t vocab = 30;
  const SamplerConfig cfg{.temperature = 0.9f, .top_k = 20, .seed = 1234};
  const Sampler sampler(cfg);
  for (uint32_t step = 0; step < 200; ++step) {
    const std::vector<float> l = random_logits(1, vocab, step);
    const VerifyResult r =
        verify_sampling(DraftTree{}, l.data(), vocab, cfg, VerifyRng{cfg.seed, 42, step});
    ASSERT_EQ(r.emitted.size(), 1u);
    EXPECT_EQ(r.emitted[0], sampler.sample(l.data(), vocab, 42, step));
    EXPECT_FALSE(r.all_accepted);
  }
}

// ---- refused input ----

TEST(VerifyErrors, BadInputIsRefused) {
  const DraftTree chain = DraftTree::chain({1, 2});
  std::vector<ProcessedDist> rows(3, one_hot(1));
  EXPECT_NO_THROW(verify_with_dists(chain, rows, VerifyRng{}));
  // One row short.
  EXPECT_THROW(verify_with_dists(chain, std::span(rows).first(2), VerifyRng{}), Error);
  // A q that does not sum to 1.
  DraftTree bad_q;
  bad_q.add(-1, 1, ProcessedDist{{{1, 0.5}}});
  EXPECT_THROW(verify_with_dists(bad_q, std::span(rows).first(2), VerifyRng{}), Error);
  // A p that does not sum to 1, an empty p.
  std::vector<ProcessedDist> bad_p{ProcessedDist{{{1, 0.5}, {2, 0.4}}}, one_hot(2), one_hot(0)};
  EXPECT_THROW(verify_with_dists(chain, bad_p, VerifyRng{}), Error);
  bad_p[0] = ProcessedDist{};
  EXPECT_THROW(verify_with_dists(chain, bad_p, VerifyRng{}), Error);
  // An invalid tree (parent after child), a token outside the vocabulary.
  DraftTree order;
  order.add(1, 1, one_hot(1));
  order.add(-1, 1, one_hot(1));
  EXPECT_THROW(verify_with_dists(order, rows, VerifyRng{}), Error);
  std::vector<float> l(3 * 2, 0.0f);
  EXPECT_THROW(verify_greedy(DraftTree::chain({1, 5}), l.data(), 2), Error);
  EXPECT_THROW(verify_greedy(chain, l.data(), 0), Error);
  // More siblings than there are accept lanes (sampling only; greedy needs no uniforms).
  DraftTree wide;
  for (uint32_t i = 0; i <= kMaxVerifySiblings; ++i) wide.add(-1, 0, one_hot(0));
  std::vector<ProcessedDist> wide_rows(wide.size() + 1, one_hot(1));  // every child rejected
  EXPECT_THROW(verify_with_dists(wide, wide_rows, VerifyRng{}), Error);
  std::vector<float> wl((wide.size() + 1) * 2, 0.0f);
  EXPECT_NO_THROW(verify_greedy(wide, wl.data(), 2));
}

}  // namespace
}  // namespace ssd
