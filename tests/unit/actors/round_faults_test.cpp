// Faults inside the rounds of a split run, leader and drafter actor in one process over loopback:
//   - a drafter whose answer leaves out a sequence (sequence 0 included, whose id equals a
//     default speculation's) is an error naming the sequence and the round, in every round;
//   - so is an answer with an entry for a sequence at length 0 (a decode step gets none);
//   - the drafter lead's pre-speculation is watched in every round, not only in round 0: a job
//     that hangs in round 1 fires the drafter's watchdog naming the pre-speculation and round 1.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "actors/roles/remote_decode.h"
#include "tests/unit/actors/split_fixture.h"

namespace ssd {
namespace {

using namespace std::chrono_literals;
using test::split::TinyTarget;

std::vector<GenerationRequest> requests(size_t b) {
  return test::split::tiny_requests(b, 4, 16);
}

std::string run_with_missing(int32_t skip, int64_t skip_from,
                             const std::vector<GenerationRequest>& reqs = requests(2)) {
  TinyTarget t;
  LoopbackHub hub(2);
  // Every answer a one-token chain, for every sequence but `skip` from round `skip_from` on.
  std::thread drafter([&] {
    test::split::run_scripted_drafter_lead(hub.endpoint(1), {.skip = skip, .skip_from = skip_from});
  });
  Watchdog dog(0, Role::kTarget, [](const std::string&) {});
  std::string err = "(no error)";
  {
    LocalTarget target(*t.engine->model, *t.engine->kv);
    const RankLayout leader = RankLayout::make(2, 0, 1);  // RemoteDecoder keeps a reference
    RemoteDecoder dec(target, hub.endpoint(0), leader, {}, 2, dog, 30);
    try {
      dec.run(reqs, true);
    } catch (const Error& e) {
      err = e.what();
    }
  }
  hub.endpoint(0).send(1, DrafterShutdown{});
  drafter.join();
  return err;
}

TEST(RoundFaults, MissingSpeculationForSequenceZeroIsAnError) {
  const std::string err = run_with_missing(0, 0);
  EXPECT_NE(err.find("the drafter sent no speculation for sequence 0 in round 0"),
            std::string::npos)
      << err;
}

// A sequence at length 0 (here: one token left after the prefill's, so the round may decide only
// the target's own) is a decode step, for which the drafter must send nothing; an entry for it
// means the two sides disagree on the round, and the leader says so.
TEST(RoundFaults, ASpeculationForASequenceAtLengthZeroIsAnError) {
  std::vector<GenerationRequest> reqs = requests(2);
  reqs[0].max_new_tokens = 2;
  const std::string err = run_with_missing(-1, 0, reqs);
  EXPECT_NE(err.find("drafter sent a speculation for sequence 0 in round 0, whose length is 0"),
            std::string::npos)
      << err;
}

TEST(RoundFaults, MissingSpeculationInALaterRoundIsAnError) {
  // Round 0 answers both sequences; from round 1 on, sequence 1 is left out (its round-0
  // speculation must not be verified a second time).
  const std::string err = run_with_missing(1, 1);
  EXPECT_NE(err.find("the drafter sent no speculation for sequence 1 in round 1"),
            std::string::npos)
      << err;
}

// A drafter whose branch drafting (pre-speculation: requests with a suffix) hangs in
// every round but round 0, until released, as a stuck device would.
class HangAfterRoundZero final : public Drafter {
 public:
  HangAfterRoundZero(Drafter& inner, const Watchdog& dog) : inner_(inner), dog_(dog) {}
  std::string name() const override { return "hang-after-round-0"; }
  void start(int32_t seq, std::span<const int32_t> prompt) override { inner_.start(seq, prompt); }
  void commit(int32_t seq, std::span<const int32_t> t) override { inner_.commit(seq, t); }
  void finish(int32_t seq) override { inner_.finish(seq); }
  std::vector<DraftTree> draft(std::span<const DraftRequest> reqs) override {
    const bool branches = !reqs.empty() && !reqs[0].suffix.empty();
    if (branches && dog_.phase().find("round 0") == std::string::npos) {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [&] { return released_; });
    }
    return inner_.draft(reqs);
  }
  void release() {
    std::lock_guard<std::mutex> lock(mutex_);
    released_ = true;
    cv_.notify_all();
  }

 private:
  Drafter& inner_;
  const Watchdog& dog_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool released_ = false;
};

TEST(RoundFaults, LeadPreSpeculationIsWatchedAfterRoundZero) {
  TinyTarget t;
  LoopbackHub hub(2);
  std::mutex m;
  std::string fired;
  Watchdog dog0(0, Role::kTarget, [](const std::string&) {});
  Watchdog dog1(1, Role::kDrafter, [&](const std::string& msg) {
    std::lock_guard<std::mutex> lock(m);
    fired = msg;
  });
  std::unique_ptr<Drafter> self = t.self_drafter();
  HangAfterRoundZero primary(*self, dog1);
  NgramDrafter backup(NgramOptions{});
  SsdDrafterOptions o;
  o.k = 2;
  o.fan_out.budget = 4;
  const RankLayout leader = RankLayout::make(2, 0, 1), drafter_rank = RankLayout::make(2, 1, 1);
  std::thread drafter([&] {
    run_drafter_actor(hub.endpoint(1), drafter_rank, primary, &backup, o,
                      test::split::DrafterActorThread::actor_options(0.5), dog1);
  });
  // Releases the hang once the watchdog fired (or after 20 s: the test then fails below).
  std::thread releaser([&] {
    for (int i = 0; i < 200; ++i) {
      {
        std::lock_guard<std::mutex> lock(m);
        if (!fired.empty()) break;
      }
      std::this_thread::sleep_for(100ms);
    }
    primary.release();
  });
  {
    const Envelope ready = hub.endpoint(0).recv(30s);
    EXPECT_EQ(ready.kind, MsgKind::kDrafterReady);
    LocalTarget target(*t.engine->model, *t.engine->kv);
    RemoteDecoder dec(target, hub.endpoint(0), leader, {}, 2, dog0, 60);
    dec.run(requests(1), true);
    dec.shutdown_drafters();
  }
  releaser.join();
  drafter.join();
  EXPECT_NE(fired.find("rank 1 (drafter) timed out after 0.5 s while pre-speculating"),
            std::string::npos)
      << fired;
  EXPECT_NE(fired.find("for round 1"), std::string::npos) << fired;
}

}  // namespace
}  // namespace ssd
