// The watchdog in-process, with an injected abort callback instead of MPI_Abort: it fires on a
// phase that outlives its deadline with a message naming rank, role, deadline and phase, and does
// not fire on phases that end in time. (The default callback's MPI_Abort is exercised under
// mpirun in tests/mpi/fault_test.cpp.)
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "actors/transport/watchdog.h"

namespace ssd {
namespace {

struct Recorder {
  std::mutex mutex;
  std::vector<std::string> messages;
  Watchdog::AbortFn fn() {
    return [this](const std::string& m) {
      std::lock_guard lock(mutex);
      messages.push_back(m);
    };
  }
  size_t count() {
    std::lock_guard lock(mutex);
    return messages.size();
  }
  std::string message(size_t i) {
    std::lock_guard lock(mutex);
    return i < messages.size() ? messages[i] : std::string("(no message)");
  }
};

// Waits up to 5 s (generous: the watchdog wakes at its deadline; the slack is for a loaded
// machine) for the watchdog to fire and its callback to have run: fired() turns true before the
// callback is called (outside the watchdog's lock), so a test that read the message as soon as
// fired() said so could find none yet (seen once in a CI run under load).
bool wait_fired(Watchdog& dog, Recorder& rec) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while ((!dog.fired() || rec.count() == 0) && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return dog.fired() && rec.count() > 0;
}

TEST(Watchdog, FiresOnAStuckPhase) {
  Recorder rec;
  Watchdog dog(2, Role::kDrafter, rec.fn());
  const auto start = std::chrono::steady_clock::now();
  dog.arm("pre-speculating round 7", 0.05);
  ASSERT_TRUE(wait_fired(dog, rec));
  const double after = std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
                           .count();
  EXPECT_GE(after, 0.05) << "fired before its deadline";
  ASSERT_EQ(rec.count(), 1u);
  EXPECT_EQ(rec.message(0), "rank 2 (drafter) timed out after 0.05 s while pre-speculating "
                            "round 7");
}

TEST(Watchdog, PhasesThatEndInTimeDoNotFire) {
  Recorder rec;
  Watchdog dog(0, Role::kTarget, rec.fn());
  // 20 phases of 1 ms each under a 200 ms deadline, then a disarm: nothing may fire. Then wait
  // 300 ms past the last deadline to make sure a disarmed phase stays quiet.
  for (int i = 0; i < 20; ++i) {
    dog.arm("verifying round " + std::to_string(i), 0.2);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  dog.disarm();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_FALSE(dog.fired());
  EXPECT_EQ(rec.count(), 0u);
}

TEST(Watchdog, ScopeRestoresTheOuterPhase) {
  Recorder rec;
  Watchdog dog(1, Role::kTarget, rec.fn());
  dog.arm("serving", 0.3);
  {
    Watchdog::Scope inner(dog, "all-reduce after attention", 10);
    EXPECT_EQ(dog.phase(), "all-reduce after attention");
  }
  EXPECT_EQ(dog.phase(), "serving");
  // The outer phase keeps its original deadline (0.3 s from its arm), so it fires.
  ASSERT_TRUE(wait_fired(dog, rec));
  EXPECT_EQ(rec.message(0), "rank 1 (target) timed out after 0.3 s while serving");
}

}  // namespace
}  // namespace ssd
