// The actor loop answers peers while a compute job runs, delivers job results on the loop thread,
// carries a job's exception out of run(), refuses a message it has no handler for, and costs
// little CPU when idle.
#include <gtest/gtest.h>

#include <time.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "actors/transport/actor_loop.h"
#include "actors/transport/loopback_transport.h"

namespace ssd {
namespace {

using namespace std::chrono_literals;

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

TEST(ActorLoop, AnswersPingWhileComputeRuns) {
  LoopbackHub hub(2);
  ActorLoop loop(hub.endpoint(1));
  std::atomic<bool> job_running{false}, release_job{false}, job_done{false};
  loop.on(MsgKind::kPing, [&](const Envelope& env) {
    loop.transport().send(env.peer, Pong{decode<Ping>(env).id});
  });
  // The long job holds the compute thread until the test releases it; its completion ends run().
  loop.submit(
      [&] {
        job_running = true;
        while (!release_job) std::this_thread::sleep_for(1ms);
      },
      [&] {
        job_done = true;
        loop.stop();
      });
  std::thread actor([&] { loop.run(); });

  Transport& peer = hub.endpoint(0);
  while (!job_running) std::this_thread::sleep_for(1ms);
  for (uint64_t id = 1; id <= 3; ++id) {
    peer.send(1, Ping{id});
    // 2 s: the loop answers within a poll interval (<= 200 us) plus scheduling; the bound only
    // guards against a loop that waits for the job (which never ends until released below).
    const Envelope pong = peer.recv(2s);
    EXPECT_EQ(decode<Pong>(pong).id, id);
    EXPECT_TRUE(job_running && !job_done) << "the ping was answered only after the job";
  }
  release_job = true;
  actor.join();
  EXPECT_TRUE(job_done);
}

TEST(ActorLoop, JobResultComesBackOnTheLoopThread) {
  LoopbackHub hub(1);
  ActorLoop loop(hub.endpoint(0));
  const std::thread::id loop_thread = std::this_thread::get_id();
  std::thread::id job_thread, done_thread;
  int result = 0;
  loop.submit<int>(
      [&] {
        job_thread = std::this_thread::get_id();
        return 6 * 7;
      },
      [&](int r) {
        done_thread = std::this_thread::get_id();
        result = r;
        EXPECT_EQ(loop.jobs_in_flight(), 0);
        loop.stop();
      });
  EXPECT_EQ(loop.jobs_in_flight(), 1);
  loop.run();
  EXPECT_EQ(result, 42);
  EXPECT_NE(job_thread, loop_thread);
  EXPECT_EQ(done_thread, loop_thread);
  EXPECT_EQ(loop.stats().jobs, 1u);
}

TEST(ActorLoop, JobExceptionComesOutOfRun) {
  LoopbackHub hub(1);
  ActorLoop loop(hub.endpoint(0));
  bool done_called = false;
  loop.submit([] { throw Error("draft model ran out of KV cache"); }, [&] { done_called = true; });
  try {
    loop.run();
    FAIL() << "run() returned normally";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "draft model ran out of KV cache");
  }
  EXPECT_FALSE(done_called);
}

TEST(ActorLoop, UnhandledKindIsNamed) {
  LoopbackHub hub(2);
  ActorLoop loop(hub.endpoint(1));
  hub.endpoint(0).send(1, Outcome{});
  try {
    loop.run();
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "rank 1 got Outcome from rank 0 and has no handler for it");
  }
}

TEST(ActorLoop, IdleLoopLeavesTheCoreFree) {
  LoopbackHub hub(1);
  ActorLoop loop(hub.endpoint(0));
  boost::asio::steady_timer stop_timer(loop.io_context(), 400ms);
  stop_timer.async_wait([&](const boost::system::error_code&) { loop.stop(); });
  const double cpu0 = thread_cpu_seconds();
  const auto t0 = std::chrono::steady_clock::now();
  loop.run();
  const double cpu = thread_cpu_seconds() - cpu0;
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // Idle, the loop wakes every 200 us for a try_recv of a few microseconds: ~2-5% of a core.
  // A loop that spins would use ~100%. 15% leaves room for slow wake-ups on a loaded machine.
  EXPECT_LT(cpu, 0.15 * wall) << "idle loop used " << cpu << " s of CPU in " << wall << " s";
  EXPECT_GT(loop.stats().empty_polls, 100u) << "the loop did not keep polling";
}

}  // namespace
}  // namespace ssd
