// The TP group's two ends without MPI: a scripted Collective stands for the group. A worker waits
// for the leader's next call with the idle broadcast (no deadline under NCCL) and for the frame
// itself with the ordinary one; a frame length no frame can have is refused before allocating;
// and the leader, when unwinding from an error, runs no collective (its workers may be stuck in
// the collective of the forward that failed, and the error must reach the user first).
#include <gtest/gtest.h>

#include <cstring>
#include <deque>
#include <string>

#include "actors/roles/tp_target.h"
#include "actors/transport/frame.h"
#include "runtime/core/error.h"

namespace ssd {
namespace {

// A group of two; this end is `rank`. Broadcasts from the root record "step" or "idle"; on a
// receiving rank they deliver the scripted bytes in order.
class ScriptedGroup final : public Collective {
 public:
  explicit ScriptedGroup(int rank) : rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return 2; }
  void allreduce_sum(float*, int64_t) override { fail("scripted group: unexpected allreduce"); }
  void allgatherv(const float*, const int64_t*, float*) override {
    fail("scripted group: unexpected allgatherv");
  }
  void broadcast(void* data, int64_t bytes, int root) override { take("step", data, bytes, root); }
  void broadcast_idle(void* data, int64_t bytes, int root) override {
    take("idle", data, bytes, root);
  }

  void script_frame(const std::vector<std::byte>& frame) {
    const uint64_t n = frame.size();
    script_length(n);
    script.emplace_back(frame);
  }
  void script_length(uint64_t n) {
    std::vector<std::byte> len(sizeof n);
    std::memcpy(len.data(), &n, sizeof n);
    script.push_back(std::move(len));
  }

  std::vector<std::string> calls;
  std::deque<std::vector<std::byte>> script;

 private:
  void take(const char* how, void* data, int64_t bytes, int root) {
    calls.push_back(how);
    if (rank_ == root) return;
    SSD_CHECK(!script.empty(), "scripted group: nothing left to deliver");
    SSD_CHECK(static_cast<int64_t>(script.front().size()) == bytes,
              "scripted group: {} bytes asked, {} scripted", bytes, script.front().size());
    std::memcpy(data, script.front().data(), script.front().size());
    script.pop_front();
  }
  int rank_;
};

// A target no test here may reach.
class UnreachableTarget final : public TargetModel {
 public:
  const ModelConfig& config() const override { return cfg_; }
  ForwardResult forward(const Batch&) override { fail("unreachable target: forward"); }
  SeqId create_seq() override { fail("unreachable target: create_seq"); }
  void release_seq(SeqId) override {}
  int64_t seq_length(SeqId) const override { return 0; }
  void truncate(SeqId, int64_t) override {}
  void compact(SeqId, int64_t, std::span<const int32_t>) override {}
  KvCapacity capacity() const override { return {}; }

 private:
  ModelConfig cfg_;
};

TEST(TpGroup, WorkerWaitsForTheNextCallWithoutADeadline) {
  ScriptedGroup group(1);
  group.script_frame(encode_frame(TargetKvRelease{3}));
  group.script_frame(encode_frame(TargetShutdown{}));
  UnreachableTarget shard;
  Watchdog dog(1, Role::kTarget, [](const std::string&) {});
  run_tp_worker(shard, group, dog, 5);
  // Per call: the idle wait for its length, then the frame within the step's deadline.
  EXPECT_EQ(group.calls, (std::vector<std::string>{"idle", "step", "idle", "step"}));
}

TEST(TpGroup, WorkerRefusesAFrameLengthNoFrameCanHave) {
  ScriptedGroup group(1);
  group.script_length(uint64_t{1} << 40);
  UnreachableTarget shard;
  Watchdog dog(1, Role::kTarget, [](const std::string&) {});
  try {
    run_tp_worker(shard, group, dog, 5);
    ADD_FAILURE() << "a frame length of 2^40 bytes was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("announced a frame of 1099511627776 bytes"),
              std::string::npos)
        << e.what();
  }
}

TEST(TpGroup, LeaderShutsTheGroupDownWhenDone) {
  ScriptedGroup group(0);
  UnreachableTarget shard;
  { TpLeaderTarget leader(shard, group); }
  EXPECT_EQ(group.calls.size(), 2u) << "length and frame of TargetShutdown";
}

TEST(TpGroup, LeaderUnwindingFromAnErrorRunsNoCollective) {
  ScriptedGroup group(0);
  UnreachableTarget shard;
  try {
    TpLeaderTarget leader(shard, group);
    throw Error("forward failed after its frame was broadcast");
  } catch (const Error&) {
  }
  EXPECT_TRUE(group.calls.empty()) << "the leader broadcast while unwinding";
}

}  // namespace
}  // namespace ssd
