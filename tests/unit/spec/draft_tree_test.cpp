// DraftTree::truncated: the nodes at depth <= d of a branching tree, in their order, with their
// q and predicted lists, parents renumbered; a chain cut to its first d tokens; depth 0 is empty
// and a depth past the tree keeps it whole.
#include <gtest/gtest.h>

#include "runtime/spec/draft_tree.h"

namespace ssd {
namespace {

TEST(DraftTree, TruncatedKeepsTheNodesUpToADepth) {
  // root -> 10 -> 11 -> 12, root -> 20 -> 21; nodes in creation order 10, 20, 11, 21, 12.
  DraftTree t;
  const int32_t a = t.add(-1, 10, one_hot(10));
  const int32_t b = t.add(-1, 20, one_hot(20));
  const int32_t a2 = t.add(a, 11, one_hot(11));
  t.add(b, 21, one_hot(21));
  t.add(a2, 12, one_hot(12));
  for (int32_t tok : t.tokens) t.predicted.push_back(one_hot(tok + 100));

  const DraftTree two = t.truncated(2);
  EXPECT_EQ(two.tokens, (std::vector<int32_t>{10, 20, 11, 21}));
  EXPECT_EQ(two.parents, (std::vector<int32_t>{-1, -1, 0, 1}));
  ASSERT_EQ(two.q.size(), 4u);
  EXPECT_EQ(two.q[3].prob_of(21), 1.0f);
  ASSERT_EQ(two.predicted.size(), 4u);
  EXPECT_EQ(two.predicted[2].prob_of(111), 1.0f);
  two.validate(200);

  EXPECT_EQ(t.truncated(1).tokens, (std::vector<int32_t>{10, 20}));
  EXPECT_TRUE(t.truncated(0).empty());
  EXPECT_EQ(t.truncated(9).tokens, t.tokens);
  EXPECT_EQ(DraftTree::chain({5, 6, 7, 8}).truncated(2).tokens, (std::vector<int32_t>{5, 6}));
  EXPECT_TRUE(DraftTree::chain({5, 6, 7, 8}).truncated(2).is_chain());
}

}  // namespace
}  // namespace ssd
