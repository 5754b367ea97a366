// Outcome prediction (runtime/saguaro/outcome_prediction.h): per position the F_k likeliest
// tokens of the drafter's ranking, the drafted token skipped for k < K (never at k = K), k
// ascending then likeliest first; positions without a ranking or with F = 0 predict nothing.
#include "runtime/saguaro/outcome_prediction.h"

#include <gtest/gtest.h>

namespace ssd {
namespace {

ProcessedDist ranking(std::vector<std::pair<int32_t, double>> entries) {
  ProcessedDist d;
  for (auto [id, p] : entries) d.tokens.push_back(TokenProb{id, p});
  return d;
}

using Pairs = std::vector<std::pair<int32_t, int32_t>>;  // (k, bonus)

Pairs pairs(const std::vector<PredictedOutcome>& v) {
  Pairs out;
  for (const PredictedOutcome& o : v) out.emplace_back(o.k, o.bonus);
  return out;
}

TEST(OutcomePrediction, SkipsTheDraftedTokenBelowKAndKeepsOrder) {
  const std::vector<int32_t> tokens = {5, 7};  // K = 2
  const std::vector<ProcessedDist> predicted = {
      ranking({{5, 0.5}, {3, 0.2}, {9, 0.1}, {7, 0.05}}),  // position 0: 5 was drafted
      ranking({{7, 0.6}, {5, 0.3}, {3, 0.1}}),             // position 1: 7 was drafted
      ranking({{1, 0.4}, {2, 0.3}, {3, 0.2}}),             // position 2 = K: nothing skipped
  };
  const std::vector<int32_t> fan_out = {2, 1, 2};
  const std::vector<PredictedOutcome> out = predict_outcomes(tokens, predicted, fan_out);
  EXPECT_EQ(pairs(out), (Pairs{{0, 3}, {0, 9}, {1, 5}, {2, 1}, {2, 2}}));
  EXPECT_DOUBLE_EQ(out[0].prob, 0.2);
  EXPECT_DOUBLE_EQ(out[3].prob, 0.4);
}

TEST(OutcomePrediction, AtKTheTopTokenIsPredictedEvenIfItEqualsAnEarlierDraft) {
  const std::vector<int32_t> tokens = {4};
  const std::vector<ProcessedDist> predicted = {ranking({{4, 0.9}, {8, 0.1}}),
                                                ranking({{4, 0.7}, {6, 0.3}})};
  EXPECT_EQ(pairs(predict_outcomes(tokens, predicted, std::vector<int32_t>{1, 1})),
            (Pairs{{0, 8}, {1, 4}}));
}

TEST(OutcomePrediction, ZeroFanOutShortRankingsAndMissingPositions) {
  const std::vector<int32_t> tokens = {5, 7, 9};
  // Only positions 0 and 1 have a ranking (e.g. a drafter cut short by the context).
  const std::vector<ProcessedDist> predicted = {ranking({{5, 0.8}, {1, 0.2}}),
                                                ranking({{2, 0.5}, {7, 0.5}})};
  // F_0 = 3 but the ranking has one token besides the drafted one; F_1 = 0; F_2, F_3 have no
  // ranking to draw from.
  EXPECT_EQ(pairs(predict_outcomes(tokens, predicted, std::vector<int32_t>{3, 0, 2, 2})),
            (Pairs{{0, 1}}));
  // A ranking that repeats a token (n-gram lists may not, but nothing forbids it) yields it once.
  const std::vector<ProcessedDist> dup = {ranking({{3, 0.5}, {3, 0.3}, {4, 0.2}})};
  EXPECT_EQ(pairs(predict_outcomes(std::vector<int32_t>{}, dup, std::vector<int32_t>{2})),
            (Pairs{{0, 3}, {0, 4}}));
}

}  // namespace
}  // namespace ssd
