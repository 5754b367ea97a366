// Rank-to-role mapping and its validation messages.
#include <gtest/gtest.h>

#include "actors/transport/rank_layout.h"
#include "runtime/core/error.h"

namespace ssd {
namespace {

TEST(RankLayout, FiveRanksTwoTargetThreeDrafters) {
  const RankLayout l = RankLayout::make(5, 3, 2);
  EXPECT_EQ(l.n_drafters(), 3);
  EXPECT_EQ(l.role(), Role::kDrafter);
  EXPECT_EQ(l.role_of(1), Role::kTarget);
  EXPECT_EQ(l.drafter_lead(), 2);
  EXPECT_FALSE(l.is_drafter_lead());
  EXPECT_EQ(l.drafter_index(), 1);
  EXPECT_EQ(l.tp_rank(), -1);
  EXPECT_EQ(l.target_ranks(), (std::vector<int>{0, 1}));
  EXPECT_EQ(l.drafter_ranks(), (std::vector<int>{2, 3, 4}));
  EXPECT_EQ(l.describe(), "rank 3 (drafter 2 of 3)");
  EXPECT_EQ(l.describe(0), "rank 0 (target leader, TP 1 of 2)");
  EXPECT_EQ(l.summary(), "5 ranks: target TP=2 on ranks 0-1, 3 drafter ranks 2-4");
}

TEST(RankLayout, SingleProcess) {
  const RankLayout l = RankLayout::make(1, 0, 1);
  EXPECT_TRUE(l.is_target_leader());
  EXPECT_EQ(l.n_drafters(), 0);
  EXPECT_EQ(l.drafter_lead(), -1);
  EXPECT_EQ(l.summary(), "1 rank: target TP=1 on rank 0, no drafter rank");
  EXPECT_EQ(RankLayout::make(2, 1, 1).summary(),
            "2 ranks: target TP=1 on rank 0, drafter on rank 1");
}

TEST(RankLayout, InvalidLayoutsAreNamed) {
  auto what = [](int world, int rank, int tp) -> std::string {
    try {
      RankLayout::make(world, rank, tp);
    } catch (const Error& e) {
      return e.what();
    }
    return "(accepted)";
  };
  EXPECT_EQ(what(2, 0, 3), "--tp 3 needs at least 3 ranks, the job has 2 (start it with mpirun "
                           "-n 3 or more)");
  EXPECT_EQ(what(2, 0, 0), "--tp 0 is invalid: the target needs at least 1 rank");
  EXPECT_EQ(what(2, 2, 1), "rank 2 is outside the job's ranks 0..1");
  EXPECT_EQ(what(0, 0, 1), "the job has 0 ranks; it needs at least 1");
  EXPECT_EQ(what(4, 3, 4), "(accepted)");
}

}  // namespace
}  // namespace ssd
