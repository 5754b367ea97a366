// ThreadPool: every index of [0, n) is visited exactly once for many n and pool sizes (including
// n smaller than the pool and n = 0), chunks are contiguous and carry a valid thread index, the
// pool is reusable thousands of times, exceptions from any chunk (caller's or a worker's) reach
// the caller, and nested parallel_for runs inline instead of deadlocking.
#include "kernels/cpu/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
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

TEST(ThreadPool, RejectsBadSize) { EXPECT_THROW(ThreadPool(0), Error); }

}  // namespace
}  // namespace ssd::kernels
