// The leader's wait for its drafter lead watches every drafter rank (drafter_loss.h,
// DrafterLossPolicy::ranks): the lead's answers wait for every rank's pre-speculation share, so a
// secondary drafter rank whose process is gone is a lost drafter, named by its own rank, and one
// that is stopped is named when the deadline expires. Over loopback, with a scripted probe; no
// frame ever comes (but heartbeats, which do not count), so only the probe or the deadline can
// end each wait.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "actors/roles/drafter_loss.h"
#include "actors/transport/loopback_transport.h"

namespace ssd {
namespace {

using namespace std::chrono_literals;

// The loss that ends a wait for rank 1 on a 3-rank hub (leader 0, drafter lead 1, secondary 2),
// each rank's process in the state `states` gives it.
DrafterLost wait_on(const std::vector<ProcessState>& states, std::vector<int> ranks,
                    double deadline_s) {
  LoopbackHub hub(3);
  DrafterLossPolicy policy;
  policy.continue_on_loss = true;
  policy.slice = 10ms;
  policy.ranks = std::move(ranks);
  policy.probe = [&](int rank) { return states.at(static_cast<size_t>(rank)); };
  try {
    wait_for_drafter(hub.endpoint(0), 1, deadline_s, policy, "waiting for round 4");
  } catch (const DrafterLost& e) {
    return e;
  }
  ADD_FAILURE() << "the wait returned without a frame";
  return DrafterLost(-1, false, "");
}

constexpr ProcessState kRun = ProcessState::kRunning;

TEST(DrafterLossRanks, AGoneSecondaryRankIsTheLossAndNamedDied) {
  // 600 s: only the probe can end the wait within the test's time limit.
  const DrafterLost e = wait_on({kRun, kRun, ProcessState::kGone}, {1, 2}, 600);
  EXPECT_EQ(e.rank, 2);
  EXPECT_TRUE(e.died);
  EXPECT_EQ(e.cause,
            "died (its process is gone; the drafter lead's answers wait for its share) while "
            "waiting for round 4");
}

TEST(DrafterLossRanks, TheAwaitedLeadGoneIsNamedFirst) {
  const DrafterLost e = wait_on({kRun, ProcessState::kGone, ProcessState::kGone}, {1, 2}, 600);
  EXPECT_EQ(e.rank, 1);
  EXPECT_EQ(e.cause, "died (its process is gone) while waiting for round 4");
}

TEST(DrafterLossRanks, AStoppedSecondaryIsNamedWhenTheDeadlineExpires) {
  const DrafterLost e = wait_on({kRun, kRun, ProcessState::kStopped}, {1, 2}, 0.2);
  EXPECT_EQ(e.rank, 2);
  EXPECT_FALSE(e.died);
  EXPECT_EQ(e.cause,
            "deadline of 0.2 s expired while waiting for round 4 (its process is stopped; the "
            "drafter lead's answers wait for its share)");
}

TEST(DrafterLossRanks, WithoutRanksOnlyTheAwaitedRankIsProbed) {
  // A gone rank 2 nobody listed: the deadline decides, and names the lead.
  const DrafterLost e = wait_on({kRun, kRun, ProcessState::kGone}, {}, 0.2);
  EXPECT_EQ(e.rank, 1);
  EXPECT_FALSE(e.died);
  EXPECT_EQ(e.cause, "deadline of 0.2 s expired while waiting for round 4");
}

TEST(DrafterLossRanks, AFrameStillEndsTheWaitWhileEveryRankLives) {
  LoopbackHub hub(3);
  DrafterLossPolicy policy;
  policy.continue_on_loss = true;
  policy.slice = 10ms;
  policy.ranks = {1, 2};
  policy.probe = [](int) { return ProcessState::kRunning; };
  hub.endpoint(1).send(0, DrafterShutdown{});
  const Envelope env = wait_for_drafter(hub.endpoint(0), 1, 600, policy, "waiting");
  EXPECT_EQ(env.kind, MsgKind::kDrafterShutdown);
  EXPECT_EQ(env.peer, 1);
}

// A lead waiting for a stopped secondary's share still sends heartbeats (heartbeat.h); they must
// not end (or restart) the wait: the deadline still expires and names the stopped rank, and a
// frame after them still ends it.
TEST(DrafterLossRanks, HeartbeatsNeitherEndNorExtendTheWait) {
  for (const bool continue_on_loss : {true, false}) {
    LoopbackHub hub(3);
    for (int n = 0; n < 5; ++n) hub.endpoint(1).send(0, Heartbeat{1, "", n});
    DrafterLossPolicy policy;
    policy.continue_on_loss = continue_on_loss;
    policy.slice = 10ms;
    policy.ranks = {1, 2};
    policy.probe = [](int rank) { return rank == 2 ? ProcessState::kStopped : kRun; };
    if (continue_on_loss) {
      try {
        wait_for_drafter(hub.endpoint(0), 1, 0.2, policy, "waiting for round 4");
        ADD_FAILURE() << "a heartbeat ended the wait";
      } catch (const DrafterLost& e) {
        EXPECT_EQ(e.rank, 2);
        EXPECT_FALSE(e.died);
      }
    }
    hub.endpoint(1).send(0, Heartbeat{1, "", 5});
    hub.endpoint(1).send(0, DrafterShutdown{});
    const Envelope env = wait_for_drafter(hub.endpoint(0), 1, 600, policy, "waiting");
    EXPECT_EQ(env.kind, MsgKind::kDrafterShutdown) << "continue_on_loss " << continue_on_loss;
  }
}

}  // namespace
}  // namespace ssd
