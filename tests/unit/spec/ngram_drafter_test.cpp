// The n-gram drafter's lookup on hand-made contexts, where the right draft is known:
//   - the longest matching n first, the latest match first, its continuation cut at k and at the
//     context's end; nothing without a match;
//   - with depth_per_match, a continuation after an n-token match is at most ceil(d x n) tokens;
//   - bad options are refused with a message.
#include <gtest/gtest.h>

#include "runtime/core/error.h"
#include "runtime/drafters/ngram_drafter.h"

namespace ssd {
namespace {

using Tokens = std::vector<int32_t>;

Tokens first(const Tokens& ctx, int32_t k, const NgramOptions& o) {
  const auto c = NgramDrafter::lookup(ctx, k, 1, o);
  return c.empty() ? Tokens{} : c.front();
}

TEST(NgramDrafter, LongestLatestMatchFirst) {
  const NgramOptions o{};
  // "2 3" occurs twice; the 3-gram "1 2 3" once, followed by 4 5 6.
  const Tokens ctx = {1, 2, 3, 4, 5, 6, 9, 2, 3, 7, 8, 1, 2, 3};
  EXPECT_EQ(first(ctx, 8, o), (Tokens{4, 5, 6, 9, 2, 3, 7, 8}));
  EXPECT_EQ(first(ctx, 2, o), (Tokens{4, 5}));
  // Only a 1-gram matches: the latest occurrence of 5 (followed by 6 and then the end).
  EXPECT_EQ(first(Tokens{5, 6, 1, 5}, 8, o), (Tokens{6, 1, 5}));
  EXPECT_TRUE(first(Tokens{1, 2, 3}, 4, o).empty());
}

TEST(NgramDrafter, DepthFollowsTheMatchLength) {
  const Tokens ctx = {1, 2, 3, 4, 5, 6, 9, 2, 3, 7, 8, 1, 2, 3};  // 3-gram match
  EXPECT_EQ(first(ctx, 8, NgramOptions{.depth_per_match = 1}), (Tokens{4, 5, 6}));
  EXPECT_EQ(first(ctx, 8, NgramOptions{.depth_per_match = 0.5}), (Tokens{4, 5}));  // ceil 1.5
  EXPECT_EQ(first(ctx, 2, NgramOptions{.depth_per_match = 1}), (Tokens{4, 5})) << "k caps it too";
  EXPECT_EQ(first(Tokens{5, 6, 7, 1, 5}, 8, NgramOptions{.depth_per_match = 1}), (Tokens{6}));
  // Through the drafter: a chain of one-hot nodes.
  NgramDrafter d(NgramOptions{.depth_per_match = 1});
  d.start(0, ctx);
  DraftRequest r;
  r.k = 8;
  const DraftTree t = d.draft({&r, 1}).front();
  EXPECT_EQ(t.tokens, (Tokens{4, 5, 6}));
  EXPECT_TRUE(t.is_chain());
}

TEST(NgramDrafter, BadOptionsAreRefused) {
  EXPECT_THROW(NgramDrafter(NgramOptions{.n_min = 0}), Error);
  EXPECT_THROW(NgramDrafter(NgramOptions{.n_min = 3, .n_max = 2}), Error);
  EXPECT_THROW(NgramDrafter(NgramOptions{.depth_per_match = -1}), Error);
}

}  // namespace
}  // namespace ssd
