// ThreadPool: every index of [0, n) is visited exactly once for many n and pool sizes (including
// n smaller than the pool and n = 0), chunks are contiguous and carry a valid thread index, the
// pool is reusable thousands of times, exceptions from any chunk (caller's or a worker's) reach
// the caller, and nested parallel_for runs inline instead of deadlocking. The spin-then-sleep
// hand-off is exercised on both paths (spin_us = 0: every hand-off goes through the futex;
// a pause longer than the spin: workers asleep when the next job comes), parallel_for_dynamic
// covers every index once whatever the grain, two outside threads may share a pool (one runs
// inline), and pinned pools work.
#include "kernels/cpu/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include "runtime/core/error.h"

namespace ssd::kernels {
namespace {

TEST(ThreadPool, CoversEveryIndexExactlyOnce) {
  for (int size : {1, 2, 3, 4, 7}) {
    ThreadPool pool(size);
    EXPECT_EQ(pool.size(), size);
    for (int64_t n : {0, 1, 2, 3, 5, 6, 7, 8, 19, 64, 1000, 4097}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      std::atomic<int> calls{0};
      pool.parallel_for(n, [&](int64_t b, int64_t e, int tid) {
        ASSERT_LT(b, e);
        ASSERT_GE(tid, 0);
        ASSERT_LT(tid, size);
        calls++;
        for (int64_t i = b; i < e; ++i) hits[i]++;
      });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "size " << size << " n " << n;
      EXPECT_LE(calls.load(), size);
      if (n == 0) {
        EXPECT_EQ(calls.load(), 0);
      }
    }
  }
}

TEST(ThreadPool, ReusableManyTimes) {
  ThreadPool pool(3);
  std::atomic<int64_t> sum{0};
  for (int it = 0; it < 3000; ++it)
    pool.parallel_for(10, [&](int64_t b, int64_t e, int) {
      for (int64_t i = b; i < e; ++i) sum += i;
    });
  EXPECT_EQ(sum.load(), 3000 * 45);
}

TEST(ThreadPool, PropagatesExceptions) {
  ThreadPool pool(3);
  // Thrown on a worker's chunk (the last chunk is never the caller's).
  EXPECT_THROW(pool.parallel_for(9,
                                 [](int64_t b, int64_t e, int) {
                                   if (e == 9) throw Error("worker failed");
                                 }),
               Error);
  // Thrown on the caller's chunk (index 0).
  EXPECT_THROW(pool.parallel_for(9,
                                 [](int64_t b, int64_t, int) {
                                   if (b == 0) throw std::runtime_error("caller failed");
                                 }),
               std::runtime_error);
  // Every chunk throws: exactly one exception arrives, and the pool keeps working afterwards.
  EXPECT_THROW(pool.parallel_for(9, [](int64_t, int64_t, int) { throw Error("all"); }), Error);
  std::atomic<int> n{0};
  pool.parallel_for(9, [&](int64_t b, int64_t e, int) { n += static_cast<int>(e - b); });
  EXPECT_EQ(n.load(), 9);
  // Size 1 runs inline and still propagates.
  ThreadPool one(1);
  EXPECT_THROW(one.parallel_for(4, [](int64_t, int64_t, int) { throw Error("inline"); }), Error);
}

TEST(ThreadPool, NestedCallRunsInline) {
  ThreadPool pool(2);
  std::atomic<int> inner{0};
  pool.parallel_for(4, [&](int64_t b, int64_t e, int) {
    pool.parallel_for(3, [&](int64_t ib, int64_t ie, int) { inner += static_cast<int>(ie - ib); });
  });
  EXPECT_EQ(inner.load(), 2 * 3);  // two outer chunks, each running the inner loop inline
}

TEST(ThreadPool, RejectsBadSize) {
  EXPECT_THROW(ThreadPool(0), Error);
  EXPECT_THROW(ThreadPool(ThreadPool::Options{.threads = 2, .spin_us = -1}), Error);
  EXPECT_THROW(ThreadPool(ThreadPool::Options{.threads = 2, .pin_cpus = {-1}}), Error);
}

// The sleep path: no spinning at all, so each hand-off wakes sleeping workers and the caller
// sleeps until the last one is done; thousands of rounds must neither lose a wake-up (a hang)
// nor a chunk.
TEST(ThreadPool, FutexPathNeverLosesAWakeUp) {
  for (int size : {2, 3}) {
    ThreadPool pool(ThreadPool::Options{.threads = size, .spin_us = 0});
    std::atomic<int64_t> sum{0};
    for (int it = 0; it < 5000; ++it)
      pool.parallel_for(7, [&](int64_t b, int64_t e, int) {
        for (int64_t i = b; i < e; ++i) sum += i;
      });
    EXPECT_EQ(sum.load(), 5000 * 21);
    auto last_throws = [](int64_t, int64_t e, int) {
      if (e == 7) throw Error("x");
    };
    EXPECT_THROW(pool.parallel_for(7, last_throws), Error);
  }
}

// Workers that went to sleep after their spin (1 us here) are woken by the next job.
TEST(ThreadPool, WakesWorkersAfterIdle) {
  ThreadPool pool(ThreadPool::Options{.threads = 2, .spin_us = 1});
  for (int it = 0; it < 20; ++it) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::atomic<int> worker_ran{0};
    pool.parallel_for(2, [&](int64_t, int64_t, int tid) {
      if (tid == 1) worker_ran++;
    });
    ASSERT_EQ(worker_ran.load(), 1) << it;
  }
}

TEST(ThreadPool, DynamicCoversEveryIndexOnce) {
  for (int size : {1, 2, 3}) {
    ThreadPool pool(size);
    for (int64_t n : {0, 1, 5, 64, 1001})
      for (int64_t grain : {0, 1, 3, 64, 5000}) {
        std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
        pool.parallel_for_dynamic(n, grain, [&](int64_t b, int64_t e, int tid) {
          ASSERT_LT(b, e);
          ASSERT_GE(tid, 0);
          ASSERT_LT(tid, size);
          for (int64_t i = b; i < e; ++i) hits[i]++;
        });
        for (int64_t i = 0; i < n; ++i)
          ASSERT_EQ(hits[i].load(), 1) << size << " " << n << " " << grain;
      }
  }
}

// Two outside threads on one pool: the one that finds it busy runs inline; both complete.
TEST(ThreadPool, ConcurrentOutsideCallersBothComplete) {
  ThreadPool pool(2);
  std::atomic<int64_t> a{0}, b{0};
  auto run = [&](std::atomic<int64_t>& sum) {
    for (int it = 0; it < 2000; ++it)
      pool.parallel_for(10, [&](int64_t lo, int64_t hi, int) {
        for (int64_t i = lo; i < hi; ++i) sum += i;
      });
  };
  std::thread t1([&] { run(a); }), t2([&] { run(b); });
  t1.join();
  t2.join();
  EXPECT_EQ(a.load(), 2000 * 45);
  EXPECT_EQ(b.load(), 2000 * 45);
}

TEST(ThreadPool, PinnedPoolRuns) {
  const int cpus = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  ThreadPool pool(ThreadPool::Options{.threads = 3, .pin_cpus = {0, cpus - 1}});
  EXPECT_EQ(pool.pinned_cpus().size(), 2u);
  std::atomic<int> n{0};
  pool.parallel_for(30, [&](int64_t b, int64_t e, int) { n += static_cast<int>(e - b); });
  EXPECT_EQ(n.load(), 30);
}

}  // namespace
}  // namespace ssd::kernels
