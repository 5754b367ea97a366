// PrespecBudget: which chunk of pre-speculation fits before the next outcome arrives.
#include "runtime/saguaro/prespec_budget.h"

#include <gtest/gtest.h>

namespace ssd {
namespace {

TEST(PrespecBudget, NothingBeforeTheFirstWindowThenTheDearestRateUntilTheLine) {
  PrespecBudget b;
  EXPECT_FALSE(b.ready());
  EXPECT_EQ(b.branches_within(0.0, 5), 5) << "no call measured: nothing to judge a chunk by";
  // A batch's first speculations, 2 sequences in 5 ms: a chunk now has a cost, the outcome's
  // time is still unknown (the job's first round), so nothing is drafted however long `left`.
  b.observe_call(2, 0.005);
  EXPECT_EQ(b.branches_within(1.0, 8), 0);
  b.observe_window(0.004);
  EXPECT_FALSE(b.ready()) << "one call is not a line";
  // 2.5 ms a branch until three calls are measured.
  EXPECT_EQ(b.branches_within(0.0049, 8), 1);
  EXPECT_EQ(b.branches_within(0.0051, 8), 2);
  EXPECT_EQ(b.branches_within(0.0051, 1), 1) << "never more than asked";
  EXPECT_EQ(b.branches_within(0.0, 8), 0) << "the outcome is due";
  b.observe_call(1, 0.003);  // 3 ms a branch: the dearest rate now
  EXPECT_EQ(b.branches_within(0.0061, 8), 2);
  b.observe_call(4, 0.009);  // the line: 1 ms + 2 ms per branch
  EXPECT_TRUE(b.ready());
  EXPECT_EQ(b.branches_within(0.0071, 8), 3);
  EXPECT_EQ(b.branches_within(0.0029, 8), 0);
  EXPECT_EQ(b.branches_within(0.011, 0), 0);
}

TEST(PrespecBudget, WindowIsALowQuantileOfTheLatest) {
  PrespecBudget b;
  EXPECT_EQ(b.window(), 0.0);
  // 4 windows: the 0.25 quantile (floor of 0.75 -> index 0) is the smallest.
  for (double w : {0.008, 0.002, 0.010, 0.006}) b.observe_window(w);
  EXPECT_DOUBLE_EQ(b.window(), 0.002);
  // Old windows leave after kWindows newer ones.
  for (size_t i = 0; i < PrespecBudget::kWindows; ++i) b.observe_window(0.005);
  EXPECT_DOUBLE_EQ(b.window(), 0.005);
  b.observe_window(-1.0);  // not a duration: ignored
  EXPECT_DOUBLE_EQ(b.window(), 0.005);
}

TEST(PrespecBudget, FitsAsManyBranchesAsTheLineAllows) {
  PrespecBudget b;
  for (int i = 0; i < 3; ++i) b.observe_window(0.005);
  // 1 ms fixed + 2 ms per branch.
  b.observe_call(1, 0.003);
  b.observe_call(2, 0.005);
  b.observe_call(4, 0.009);
  ASSERT_TRUE(b.ready());
  EXPECT_EQ(b.branches_within(0.0029, 8), 0);  // one branch needs 3 ms
  EXPECT_EQ(b.branches_within(0.0031, 8), 1);
  EXPECT_EQ(b.branches_within(0.0071, 8), 3);  // 1 + 2 * 3 = 7 ms
  EXPECT_EQ(b.branches_within(0.0071, 2), 2);  // never more than asked
  EXPECT_EQ(b.branches_within(1.0, 8), 8);
}

TEST(PrespecBudget, FlatCallsFitWholeOrNotAtAll) {
  PrespecBudget b;
  for (int i = 0; i < 3; ++i) {
    b.observe_window(0.005);
    b.observe_call(3, 0.0001);  // a lookup drafter: 100 us whatever the size
  }
  EXPECT_EQ(b.branches_within(0.001, 30), 30);
  EXPECT_EQ(b.branches_within(0.00005, 30), 0);
}

}  // namespace
}  // namespace ssd
