// Hindsight acceptance of lookup offers (runtime/spec/draft_hindsight.h), on hand-made outputs:
//   - an offer resolves at the first emitted token that differs, counting the tokens before it,
//     or when the output has repeated all of it;
//   - an offer still open after a round's tokens waits for the next round's;
//   - offers of one sequence overlap and resolve independently; sequences are apart;
//   - an empty offer is ignored, and a finished sequence's open offers are dropped.
#include <gtest/gtest.h>

#include "runtime/spec/draft_hindsight.h"

namespace ssd {
namespace {

using Tokens = std::vector<int32_t>;
using R = DraftHindsight::Resolved;

std::vector<R> emit(DraftHindsight& h, int32_t seq, const Tokens& t) {
  std::vector<R> out;
  h.emitted(seq, t, out);
  return out;
}

TEST(DraftHindsight, ResolvesAtTheFirstDifferenceOrWhenUsedUp) {
  DraftHindsight h;
  h.offer(0, Tokens{5, 6, 7});
  EXPECT_EQ(emit(h, 0, Tokens{5, 9}), (std::vector<R>{{3, 1}}));
  EXPECT_EQ(h.pending(0), 0u);
  h.offer(0, Tokens{4});
  EXPECT_EQ(emit(h, 0, Tokens{8}), (std::vector<R>{{1, 0}}));  // wrong from its first token
  h.offer(0, Tokens{1, 2});
  EXPECT_EQ(emit(h, 0, Tokens{1, 2, 3}), (std::vector<R>{{2, 2}}));
}

TEST(DraftHindsight, AnOpenOfferWaitsForTheNextRound) {
  DraftHindsight h;
  h.offer(3, Tokens{1, 2, 3, 4});
  EXPECT_TRUE(emit(h, 3, Tokens{1, 2}).empty());
  EXPECT_EQ(h.pending(3), 1u);
  EXPECT_EQ(emit(h, 3, Tokens{3, 7}), (std::vector<R>{{4, 3}}));
}

TEST(DraftHindsight, OverlappingOffersAndSequencesResolveApart) {
  DraftHindsight h;
  h.offer(0, Tokens{1, 2, 3, 4});
  h.offer(1, Tokens{1, 1});
  EXPECT_TRUE(emit(h, 0, Tokens{1}).empty());
  h.offer(0, Tokens{2, 3, 9});  // made after the 1: judged from the next token on
  EXPECT_EQ(emit(h, 0, Tokens{2, 3, 4}), (std::vector<R>{{4, 4}, {3, 2}}));
  EXPECT_EQ(h.pending(1), 1u);  // untouched by sequence 0's output
  EXPECT_EQ(emit(h, 1, Tokens{1, 1}), (std::vector<R>{{2, 2}}));
}

TEST(DraftHindsight, EmptyOffersAndFinishedSequencesCountNothing) {
  DraftHindsight h;
  h.offer(0, Tokens{});
  EXPECT_EQ(h.pending(0), 0u);
  EXPECT_TRUE(emit(h, 0, Tokens{1, 2}).empty());
  h.offer(0, Tokens{1, 2});
  EXPECT_TRUE(emit(h, 0, Tokens{1}).empty());
  h.finish(0);
  EXPECT_EQ(h.pending(0), 0u);
  EXPECT_TRUE(emit(h, 0, Tokens{2}).empty());
}

}  // namespace
}  // namespace ssd
