// The speculation-length chooser (runtime/spec/spec_length.h) on synthetic costs and rates:
//   - expected tokens and the cost lines' fits, to 1e-9;
//   - high acceptance with cheap drafts drafts the whole range, low acceptance or expensive drafts
//     decode plainly (k = 0), a middle case stops in between; in a batch each sequence gets its
//     own length; and on random cases the chosen lengths reach the best rate over every
//     combination (exhaustive search, K = 3, three sequences) to 1e-12 relative;
//   - per-position acceptance tracks the positions separately and falls back to the prior where
//     nothing was offered;
//   - a cost line's median ignores a stalled round; the cost curve keeps a step, never falls
//     with x, and extends past the last x with the line's slope;
//   - acceptance is kept per class (the round's limit: a lookup's offer) and learnt from whole
//     offers in hindsight: classes apart, a new sequence starting from its class over every
//     sequence, positions past the choice learnt, a verified outcome in its choice's class;
//   - the controller warms up with k = K, 1 and 0 in turn (ending early, and not probing, when the
//     costs leave no length that pays even for drafts always accepted), then follows the measured costs (one
//     stalled warm-up round does not move them), probes one token past a sequence's choice (out
//     of k = 0, and past k = 1), and counts every choice in its histogram.
#include <gtest/gtest.h>

#include <random>

#include "runtime/core/error.h"
#include "runtime/spec/spec_length.h"

namespace ssd {
namespace {

// draft(N) = d0 + d1 N for N > 0 (0 at N = 0); verify(R) = v0 + v1 R.
RoundCosts costs(double d0, double d1, double v0, double v1) {
  RoundCosts c;
  for (int64_t n : {1, 4, 8}) c.draft.observe(n, d0 + d1 * static_cast<double>(n));
  for (int64_t r : {1, 5, 9, 20}) c.verify.observe(r, v0 + v1 * static_cast<double>(r));
  return c;
}

double rate(std::span<const std::vector<double>> a, std::span<const int32_t> k,
            const RoundCosts& c) {
  double e = 0;
  int64_t n = 0;
  for (size_t b = 0; b < k.size(); ++b) {
    e += expected_tokens(a[b], k[b]);
    n += k[b];
  }
  return e / (c.draft.predict(n) + c.verify.predict(static_cast<int64_t>(k.size()) + n));
}

TEST(SpecLength, ExpectedTokensIncludeTheBonus) {
  const std::vector<double> a = {0.5, 0.5, 0.8};
  EXPECT_NEAR(expected_tokens(a, 0), 1.0, 1e-12);
  EXPECT_NEAR(expected_tokens(a, 2), 1.75, 1e-12);
  EXPECT_NEAR(expected_tokens(a, 3), 1.75 + 0.2, 1e-12);
}

TEST(SpecLength, CostLineFitsALineAndKeepsZeroApart) {
  CostLine c;
  EXPECT_EQ(c.predict(3), 0.0);
  c.observe(2, 4.0);
  EXPECT_NEAR(c.predict(4), 8.0, 1e-9);  // one x: through the origin
  c.observe(6, 6.0);
  EXPECT_NEAR(c.predict(4), 5.0, 1e-9);  // 3 + 0.5 x
  EXPECT_NEAR(c.predict(0), 0.0, 1e-12);
  c.observe(0, 0.25);
  EXPECT_NEAR(c.predict(0), 0.25, 1e-12);
  EXPECT_NEAR(c.predict(4), 5.0, 1e-9);  // x = 0 stays out of the line
  CostLine stalled;  // a stalled observation moves the median, not the cost
  for (double t : {1.0, 1.0, 50.0, 1.0}) stalled.observe(1, t);
  EXPECT_NEAR(stalled.predict(1), 1.0, 1e-12);
  CostLine falling;
  falling.observe(1, 3.0);
  falling.observe(3, 1.0);
  EXPECT_NEAR(falling.predict(10), 2.0, 1e-9);  // noise, not a negative slope: the mean
}

// A verification whose cost steps up at 4 rows (a kernel changing path): the curve keeps the
// step where a line would spread it, stays non-decreasing through a noisy dip, and extends past
// the last x with the line's slope.
TEST(SpecLength, CostLineKeepsAStepAndNeverFalls) {
  CostLine c;
  for (int i = 0; i < 3; ++i) {
    c.observe(1, 2.5);
    c.observe(3, 3.3);
    c.observe(4, 5.8);
    c.observe(5, 6.2);
  }
  c.observe(2, 2.9);
  EXPECT_NEAR(c.predict(2), 2.9, 1e-12);
  EXPECT_NEAR(c.predict(3), 3.3, 1e-12) << "a line through all points would say about 3.9";
  EXPECT_NEAR(c.predict(4), 5.8, 1e-12);
  for (int i = 0; i < 3; ++i) c.observe(9, 5.0);  // a dip below x = 4..5: pooled, not a fall
  const double p4 = c.predict(4), p5 = c.predict(5), p9 = c.predict(9);
  EXPECT_LE(p4, p5);
  EXPECT_LE(p5, p9);
  EXPECT_NEAR(p9, (5.8 * 3 + 6.2 * 3 + 5.0 * 3) / 9, 1e-12) << "x = 4, 5 and 9 pooled";
  EXPECT_GE(c.predict(12), p9) << "past the last x the line's non-negative slope carries on";
  EXPECT_NEAR(c.predict(7), p9, 1e-12) << "inside a pooled block the cost is flat";
}

TEST(SpecLength, CheapDraftsAndHighAcceptanceDraftTheWholeRange) {
  const std::vector<std::vector<double>> a = {std::vector<double>(8, 0.9)};
  const std::vector<int32_t> limit = {8};
  EXPECT_EQ(choose_lengths(a, limit, costs(1e-4, 1e-5, 0.010, 0.001)),
            std::vector<int32_t>{8});
}

TEST(SpecLength, LowAcceptanceOrExpensiveDraftsDecodePlainly) {
  const std::vector<int32_t> limit = {8};
  const std::vector<std::vector<double>> low = {std::vector<double>(8, 0.1)};
  EXPECT_EQ(choose_lengths(low, limit, costs(1e-4, 1e-5, 0.010, 0.002)),
            std::vector<int32_t>{0});
  const std::vector<std::vector<double>> high = {std::vector<double>(8, 0.9)};
  EXPECT_EQ(choose_lengths(high, limit, costs(0.005, 0.020, 0.010, 0.001)),
            std::vector<int32_t>{0});
  // Verification dearer per row than its fixed cost: extra rows never pay at 0.5 acceptance.
  const std::vector<std::vector<double>> half = {std::vector<double>(8, 0.5)};
  EXPECT_EQ(choose_lengths(half, limit, costs(0, 0, 0.010, 0.012)), std::vector<int32_t>{0});
}

TEST(SpecLength, AMiddleCaseStopsWhereTheNextTokenNoLongerPays) {
  // Position rates fall: 0.9, 0.8, 0.3, ... With verify 10 ms + 2 ms per row and free drafts,
  // k = 2 gives (1 + 0.9 + 0.72) / 16 ms = 0.164/ms; k = 3 adds 0.216 tokens for 2 ms more:
  // 2.836 / 18 = 0.158/ms (worse); k = 1: 1.9 / 14 = 0.136/ms.
  const std::vector<std::vector<double>> a = {{0.9, 0.8, 0.3, 0.3, 0.3}};
  const std::vector<int32_t> limit = {5};
  EXPECT_EQ(choose_lengths(a, limit, costs(0, 0, 0.010, 0.002)), std::vector<int32_t>{2});
}

TEST(SpecLength, EachSequenceOfABatchGetsItsOwnLength) {
  const std::vector<std::vector<double>> a = {std::vector<double>(4, 0.95),
                                              std::vector<double>(4, 0.05)};
  const std::vector<int32_t> limit = {4, 4};
  EXPECT_EQ(choose_lengths(a, limit, costs(0, 1e-5, 0.010, 0.001)),
            (std::vector<int32_t>{4, 0}));
  // A limit caps the length (the request's last tokens).
  const std::vector<int32_t> capped = {2, 4};
  EXPECT_EQ(choose_lengths(a, capped, costs(0, 1e-5, 0.010, 0.001)),
            (std::vector<int32_t>{2, 0}));
}

TEST(SpecLength, ChoiceIsTheBestOverEveryCombination) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(0, 1);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<std::vector<double>> a(3, std::vector<double>(3));
    for (auto& v : a)
      for (double& x : v) x = u(rng);
    const RoundCosts c = costs(0.002 * u(rng), 0.004 * u(rng), 0.010, 0.004 * u(rng));
    const std::vector<int32_t> limit = {3, 3, 3};
    const std::vector<int32_t> k = choose_lengths(a, limit, c);
    double best = 0;
    for (int32_t x = 0; x < 64; ++x) {
      const std::vector<int32_t> kk = {x % 4, x / 4 % 4, x / 16};
      best = std::max(best, rate(a, kk, c));
    }
    EXPECT_NEAR(rate(a, k, c), best, 1e-12 * best) << "trial " << trial;
  }
}

TEST(SpecLength, PositionAcceptanceSeparatesPositions) {
  PositionAcceptance p(4);
  for (int i = 0; i < 200; ++i) p.observe(3, 2);  // positions 1, 2 accepted; 3 rejected
  const std::vector<double> r = p.rates(0.5);
  ASSERT_EQ(r.size(), 4u);
  EXPECT_GT(r[0], 0.9);
  EXPECT_GT(r[1], 0.9);
  EXPECT_LT(r[2], 0.1);
  EXPECT_EQ(r[3], 0.5);  // never offered: the prior
}

TEST(SpecLength, ControllerWarmsUpThenFollowsCostsAndProbes) {
  SpecLengthController c(SpecLengthOptions{.k_max = 4, .automatic = true, .prior_accept = 0.6,
                                           .probe_every = 3});
  const std::vector<int32_t> seqs = {7};
  const std::vector<int32_t> limit = {4};
  for (int round = 0; round < 9; ++round) {  // warm-up: K, 1 and 0 in turn, nine rounds
    const int32_t k = std::vector<int32_t>{4, 1, 0}[round % 3];
    EXPECT_EQ(c.choose(seqs, limit), std::vector<int32_t>{k}) << "round " << round;
    c.observe_draft(k, k > 0 ? 1e-4 : 0.0);
    c.observe_verify(k + 1, round == 2 ? 0.5 : 0.020 + 0.002 * (k + 1));  // one stall
  }
  // Verify: 0.020 + 0.002 per row. Drafts are never accepted here: plain decoding pays.
  for (int i = 0; i < 20; ++i) c.observe_outcome(7, 4, 0);
  int probes = 0;
  for (int round = 0; round < 12; ++round) {
    const int32_t k = c.choose(seqs, limit)[0];
    EXPECT_TRUE(k == 0 || k == 1) << "round " << round;
    probes += k == 1 ? 1 : 0;
  }
  EXPECT_EQ(probes, 3);  // one probe after every 3 rounds at 0
  EXPECT_EQ(c.histogram(), (std::vector<int64_t>{12, 6, 0, 0, 3}));
  // A sequence that chose k = 1 probes k = 2 every 4th round, the position past its choice.
  SpecLengthController u(SpecLengthOptions{.k_max = 4, .automatic = true, .prior_accept = 0.6,
                                           .probe_every = 3});
  for (int round = 0; round < 9; ++round) {
    const int32_t k = u.choose(seqs, limit)[0];
    u.observe_draft(k, k > 0 ? 1e-4 : 0.0);
    u.observe_verify(k + 1, 0.020 + 0.015 * (k + 1));  // dear rows: one token pays, two do not
  }
  for (int i = 0; i < 40; ++i) u.observe_outcome(7, 2, 1);  // position 1 accepted, 2 never
  std::vector<int32_t> chosen;
  for (int round = 0; round < 8; ++round) chosen.push_back(u.choose(seqs, limit)[0]);
  EXPECT_EQ(chosen, (std::vector<int32_t>{1, 1, 1, 2, 1, 1, 1, 2}));
  // The same costs, a sequence whose drafts are always accepted: the whole range.
  for (int i = 0; i < 40; ++i) c.observe_outcome(8, 4, 4);
  EXPECT_EQ(c.choose(std::vector<int32_t>{8}, limit), std::vector<int32_t>{4});
}

TEST(SpecLength, WarmUpEndsWhenNoLengthPaysEvenForDraftsAlwaysAccepted) {
  // A drafter whose every token costs 10 ms against a 9 ms + 1 ms-per-row verification: K = 8
  // always accepted gives 9 tokens in 98 ms, a decode step 1 in 10 ms. After the first K and 1
  // rounds the curves say so, and the K-token rounds stop (the rest of the warm-up would have
  // drafted K twice more), and so do the probes (one every 3 rounds otherwise); a drafter 100
  // times cheaper goes on warming up with K, 1 and 0 in turn.
  for (const double per_token : {0.010, 0.0001}) {
    SpecLengthController c(SpecLengthOptions{.k_max = 8, .automatic = true, .prior_accept = 0.9,
                                             .probe_every = 3});
    const std::vector<int32_t> seqs = {3}, limit = {8};
    std::vector<int32_t> chosen;
    for (int round = 0; round < (per_token > 0.001 ? 20 : 9); ++round) {
      const int32_t k = c.choose(seqs, limit)[0];
      chosen.push_back(k);
      c.observe_draft(k, per_token * k);
      c.observe_verify(k + 1, 0.009 + 0.001 * (k + 1));
      c.observe_outcome(3, k, k);  // every draft accepted whole
    }
    if (per_token > 0.001)
      EXPECT_EQ(chosen, (std::vector<int32_t>{8, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                              0, 0, 0}));
    else
      EXPECT_EQ(chosen, (std::vector<int32_t>{8, 1, 0, 8, 1, 0, 8, 1, 0}));
  }
  // No sequence able to draft (every limit 0) is not a verdict on the costs.
  SpecLengthController z(SpecLengthOptions{.k_max = 4, .automatic = true, .probe_every = 1000});
  const std::vector<int32_t> seqs = {1};
  for (int32_t k : {4, 1, 0}) {
    ASSERT_EQ(z.choose(seqs, std::vector<int32_t>{4})[0], k);
    z.observe_draft(k, k > 0 ? 1e-4 : 0.0);
    z.observe_verify(k + 1, 0.009 + 0.001 * (k + 1));
  }
  EXPECT_EQ(z.choose(seqs, std::vector<int32_t>{0})[0], 0);  // the warm-up's K round, capped
  EXPECT_EQ(z.choose(seqs, std::vector<int32_t>{4})[0], 1) << "the warm-up goes on";
  EXPECT_EQ(z.choose(seqs, std::vector<int32_t>{4})[0], 0);
  EXPECT_EQ(z.choose(seqs, std::vector<int32_t>{4})[0], 4);
}

// A controller past its warm-up, verify 10 ms + 2 ms per row, drafts free, no probes.
SpecLengthController warmed(int32_t k_max) {
  SpecLengthController c(SpecLengthOptions{.k_max = k_max, .automatic = true,
                                           .prior_accept = 0.6, .probe_every = 1000});
  const std::vector<int32_t> seqs = {99}, limit = {k_max};
  for (int round = 0; round < 9; ++round) {  // the warm-up
    const int32_t k = c.choose(seqs, limit)[0];
    c.observe_draft(k, 0);
    c.observe_verify(k + 1, 0.010 + 0.002 * (k + 1));
  }
  c.finish(99);
  return c;
}

TEST(SpecLength, OffersAreJudgedByTheirClassAndNewSequencesStartFromIt) {
  SpecLengthController c = warmed(8);
  // Sequence 1's offers of 8 tokens are copies, repeated whole; its offers of 2 never match.
  for (int i = 0; i < 40; ++i) {
    c.observe_hindsight(1, 8, 8);
    c.observe_hindsight(1, 2, 0);
  }
  EXPECT_EQ(c.choose(std::vector<int32_t>{1}, std::vector<int32_t>{8}), std::vector<int32_t>{8});
  EXPECT_EQ(c.choose(std::vector<int32_t>{1}, std::vector<int32_t>{2}), std::vector<int32_t>{0});
  // A sequence never seen starts from each class's rates over every sequence.
  EXPECT_EQ(c.choose(std::vector<int32_t>{2, 3}, std::vector<int32_t>{8, 2}),
            (std::vector<int32_t>{8, 0}));
  EXPECT_THROW(c.observe_hindsight(1, 9, 0), Error);  // past k_max
  EXPECT_THROW(c.observe_hindsight(1, 0, 0), Error);
}

TEST(SpecLength, HindsightTeachesThePositionsPastTheChoice) {
  // Verified outcomes of k = 1 say nothing of position 2; the whole offers say it never holds,
  // so k stays at 1 where the prior alone (0.6 a position, pooled) would draft further.
  SpecLengthController told = warmed(8), guessing = warmed(8);
  for (int i = 0; i < 40; ++i) {
    told.observe_hindsight(5, 8, 1);
    guessing.choose(std::vector<int32_t>{5}, std::vector<int32_t>{8});
    guessing.observe_outcome(5, 1, 1);
  }
  EXPECT_EQ(told.choose(std::vector<int32_t>{5}, std::vector<int32_t>{8}),
            std::vector<int32_t>{1});
  EXPECT_GT(guessing.choose(std::vector<int32_t>{5}, std::vector<int32_t>{8})[0], 1);
}

TEST(SpecLength, AnOutcomeCountsInTheClassOfItsChoice) {
  SpecLengthController c = warmed(8);
  for (int i = 0; i < 40; ++i) {  // limit 3: those rounds are class 3, and never accepted
    c.choose(std::vector<int32_t>{4}, std::vector<int32_t>{3});
    c.observe_outcome(4, 3, 0);
  }
  EXPECT_EQ(c.choose(std::vector<int32_t>{4}, std::vector<int32_t>{3}), std::vector<int32_t>{0});
  for (int i = 0; i < 40; ++i) c.observe_hindsight(6, 8, 8);  // class 8 learns from another
  EXPECT_EQ(c.choose(std::vector<int32_t>{4}, std::vector<int32_t>{8}), std::vector<int32_t>{8});
}

TEST(SpecLength, FixedLengthIsTheCappedRange) {
  SpecLengthController c(SpecLengthOptions{.k_max = 5, .automatic = false});
  EXPECT_EQ(c.choose(std::vector<int32_t>{1, 2}, std::vector<int32_t>{9, 3}),
            (std::vector<int32_t>{5, 3}));
  EXPECT_THROW(SpecLengthController(SpecLengthOptions{.k_max = 0}), Error);
}

}  // namespace
}  // namespace ssd
