// The in-process Collective (runtime/parallel/thread_collective.h): results, the rank-order sum
// it promises (bit for bit, checked against a sequential sum in that order), many back-to-back
// calls (the double-buffered slots), mismatched calls, and a failing rank ending the group
// instead of hanging it.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <string>

#include "runtime/core/error.h"
#include "runtime/parallel/thread_collective.h"

namespace ssd {
namespace {

// Values whose float sums depend on the order of addition (large and small magnitudes mixed).
float contribution(int rank, int64_t i) {
  const float big = (i % 3 == 0) ? 1e7f : 1.0f;
  return big * static_cast<float>((rank + 1) * (i % 7 == 0 ? -1 : 1)) + 0.1f * rank + 1e-3f * i;
}

TEST(ThreadCollective, AllreduceSumsInRankOrderOnEveryRank) {
  for (int T = 1; T <= 5; ++T) {
    const int64_t n = 1000;
    std::vector<std::vector<float>> results(T);
    run_thread_group(T, [&](Collective& c) {
      std::vector<float> v(n);
      for (int64_t i = 0; i < n; ++i) v[i] = contribution(c.rank(), i);
      c.allreduce_sum(v.data(), n);
      results[c.rank()] = v;
    });
    for (int64_t i = 0; i < n; ++i) {
      float expect = contribution(0, i);
      for (int r = 1; r < T; ++r) expect += contribution(r, i);
      // Exact: the promise is this very sequence of float additions, not a close value.
      for (int r = 0; r < T; ++r) ASSERT_EQ(results[r][i], expect) << "T " << T << " rank " << r;
    }
  }
}

TEST(ThreadCollective, AllgathervConcatenatesInRankOrder) {
  const int T = 4;
  const std::vector<int64_t> counts = {3, 0, 5, 1};
  std::vector<std::vector<float>> out(T, std::vector<float>(9));
  run_thread_group(T, [&](Collective& c) {
    std::vector<float> in(counts[c.rank()]);
    for (size_t i = 0; i < in.size(); ++i) in[i] = 10.0f * c.rank() + i;
    c.allgatherv(in.data(), counts.data(), out[c.rank()].data());
  });
  const std::vector<float> expect = {0, 1, 2, 20, 21, 22, 23, 24, 30};
  for (int r = 0; r < T; ++r) EXPECT_EQ(out[r], expect) << "rank " << r;
}

TEST(ThreadCollective, BroadcastCopiesTheRootsBytes) {
  const int T = 3;
  std::vector<std::string> got(T);
  run_thread_group(T, [&](Collective& c) {
    char buf[7] = "......";
    if (c.rank() == 2) std::memcpy(buf, "hello!", 7);
    c.broadcast(buf, 7, 2);  // 7 bytes: not a whole number of floats
    got[c.rank()] = buf;
  });
  for (int r = 0; r < T; ++r) EXPECT_EQ(got[r], "hello!") << "rank " << r;
}

TEST(ThreadCollective, ManyBackToBackCallsStayConsistent) {
  // Ranks race ahead of each other between calls; every call's result must still be its own.
  const int T = 4, calls = 2000;
  std::atomic<int> wrong{0};
  run_thread_group(T, [&](Collective& c) {
    for (int k = 0; k < calls; ++k) {
      float v[3] = {static_cast<float>(k), static_cast<float>(c.rank()), 1.0f};
      c.allreduce_sum(v, 3);
      if (v[0] != T * k || v[1] != 6.0f || v[2] != T) wrong++;
      if (k % 5 == 0) {
        const int64_t counts[4] = {1, 1, 1, 1};
        float x = static_cast<float>(k + c.rank()), all[4];
        c.allgatherv(&x, counts, all);
        for (int r = 0; r < T; ++r)
          if (all[r] != k + r) wrong++;
      }
    }
  });
  EXPECT_EQ(wrong.load(), 0);
}

TEST(ThreadCollective, MismatchedCallsAreReported) {
  try {
    run_thread_group(2, [&](Collective& c) {
      float v[4] = {};
      c.allreduce_sum(v, c.rank() == 0 ? 4 : 3);
    });
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("collective mismatch"), std::string::npos) << e.what();
  }
}

TEST(ThreadCollective, AFailingRankEndsTheGroupWithItsError) {
  // Rank 1 throws before its first collective; ranks 0 and 2 are (or will be) waiting in one.
  // Without the abort they would wait forever; the test's own timeout would catch that.
  std::atomic<int> aborted{0};
  try {
    run_thread_group(3, [&](Collective& c) {
      if (c.rank() == 1) throw Error("rank one cannot load its shard");
      float v = 1;
      try {
        c.allreduce_sum(&v, 1);
      } catch (const Error& e) {
        if (std::string(e.what()).find("rank 1 failed: rank one cannot") != std::string::npos)
          aborted++;
        throw;
      }
    });
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "rank one cannot load its shard");
  }
  EXPECT_EQ(aborted.load(), 2);
}

TEST(ThreadCollective, BadSizesAreRefused) {
  EXPECT_THROW(ThreadGroup(0), Error);
  ThreadGroup g(2);
  EXPECT_THROW(g.member(2), Error);
}

}  // namespace
}  // namespace ssd
