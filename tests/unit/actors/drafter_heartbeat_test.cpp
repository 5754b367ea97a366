// The drafter lead's sign of life for a leader that takes pushes (actors/roles/heartbeat.h):
//   - DrafterSilence, the leader's rule, on synthetic times: nothing is due before a push batch
//     starts or after it is forgotten; any frame from the lead restarts the count; the lead is
//     overdue only past the deadline, by how long it has been silent;
//   - the drafter actor: a lead sends no heartbeats to a leader that takes no pushes, and from
//     the first StartSeqs with push on, sends them every quarter of its step deadline.
// How the leader reacts to an overdue lead in a real job (it ends the job, naming the wait) is
// tests/mpi/ssd_fault_check.sh's stop_ngram case: rounds that wait for no answer need real ranks.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "actors/roles/heartbeat.h"
#include "runtime/drafters/ngram_drafter.h"
#include "tests/unit/actors/split_fixture.h"

namespace ssd {
namespace {

using namespace std::chrono_literals;

TEST(DrafterSilence, NothingIsDueBeforeAPushBatchOrAfterItIsForgotten) {
  DrafterSilence s(6);
  EXPECT_FALSE(s.overdue(1000).has_value());
  s.heard(10);  // a frame outside a push batch starts nothing
  EXPECT_FALSE(s.overdue(1000).has_value());
  s.expect(100);
  EXPECT_TRUE(s.overdue(1000).has_value());
  s.forget();
  EXPECT_FALSE(s.overdue(1000).has_value());
}

TEST(DrafterSilence, OverdueOnlyPastTheDeadlineSinceTheLastFrame) {
  DrafterSilence s(6);
  EXPECT_EQ(s.deadline_s(), 6);
  s.expect(100);
  EXPECT_FALSE(s.overdue(106).has_value()) << "exactly the deadline is not past it";
  ASSERT_TRUE(s.overdue(106.5).has_value());
  EXPECT_DOUBLE_EQ(*s.overdue(106.5), 6.5);
  s.heard(105);  // a heartbeat: the count starts again
  EXPECT_FALSE(s.overdue(110).has_value());
  ASSERT_TRUE(s.overdue(111.25).has_value());
  EXPECT_DOUBLE_EQ(*s.overdue(111.25), 6.25);
}

// Step deadline 2 s, so heartbeats every 0.5 s; the drafting jobs (n-gram, a 10-token prompt)
// take microseconds, far inside it.
class DrafterHeartbeatTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SsdDrafterOptions so;
    so.k = 2;
    so.fan_out.budget = 4;
    actor_.emplace(hub_, ngram_, so, /*step_s=*/2.0, /*with_backup=*/false);
    actor_->ready();
  }
  void TearDown() override {
    actor_->leader().send(1, DrafterShutdown{});
    actor_->join();
  }
  void start(int32_t seq, bool push) {
    StartSeqs s;
    s.seqs = {seq};
    s.prompts = {{1, 2, 3, 4, 1, 2, 3, 4, 1, 2}};
    s.emitted = {{3}};
    s.streams = {0};
    s.feature_rows = {0};
    s.prespeculate = true;
    s.push = push;
    actor_->leader().send(1, s);
  }
  // Every frame that reached the leader within `window`.
  std::vector<MsgKind> frames_within(std::chrono::milliseconds window) {
    std::vector<MsgKind> kinds;
    const auto end = std::chrono::steady_clock::now() + window;
    while (std::chrono::steady_clock::now() < end) {
      if (std::optional<Envelope> env = actor_->leader().try_recv()) kinds.push_back(env->kind);
      else std::this_thread::sleep_for(5ms);
    }
    return kinds;
  }

  LoopbackHub hub_{2};
  NgramDrafter ngram_{NgramOptions{}};
  std::optional<test::split::DrafterActorThread> actor_;
};

TEST_F(DrafterHeartbeatTest, NoneForALeaderWithoutPushesThenEveryQuarterStepWithThem) {
  start(0, /*push=*/false);
  EXPECT_EQ(actor_->recv().kind, MsgKind::kSpeculation);
  // Three heartbeat periods: a lead that sent them would have sent three.
  for (MsgKind k : frames_within(1500ms)) EXPECT_NE(k, MsgKind::kHeartbeat) << kind_name(k);
  EXPECT_EQ(actor_->heartbeats, 0);

  start(1, /*push=*/true);  // a new batch whose leader takes pushes
  const Envelope beat = [&] {
    for (;;) {  // past the answer and the push (recv's deadline bounds the wait)
      Envelope env = actor_->leader().recv(30s);
      if (env.kind == MsgKind::kHeartbeat) return env;
    }
  }();
  const Heartbeat h = decode<Heartbeat>(beat);
  EXPECT_EQ(h.rank, 1);
  EXPECT_EQ(beat.peer, 1);
  // They keep coming while the batch is idle: at least two more within six periods (six are
  // due; the loaded machine may delay a few).
  int64_t more = 0;
  for (MsgKind k : frames_within(3000ms)) more += k == MsgKind::kHeartbeat;
  EXPECT_GE(more, 2);
}

}  // namespace
}  // namespace ssd
