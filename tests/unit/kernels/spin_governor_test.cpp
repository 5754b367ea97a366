// SpinGovernor, the thread pool's choice between spinning and sleeping, driven with made-up times
// (no threads, no clock, so every decision is deterministic):
//   - late hand-offs below the threshold within a window, however long it goes on, never stop
//     spinning; a lone late hand-off changes nothing;
//   - the threshold within a window stops spinning for exactly calm_min, then spinning resumes;
//   - contention found again soon after each calm doubles the calm up to calm_max, and a quiet
//     spell longer than calm_reset brings it back to calm_min;
//   - with the defaults, a transient burst costs 2 ms of sleeping, not a second, while
//     persistent contention reaches the longest calm (~1 s) within five probes of four late
//     milliseconds each;
//   - late hand-offs count once per millisecond: another process's short burst every 100 ms,
//     however many hand-offs it delays, never calms the pool, while a thread late in most
//     milliseconds of a window does;
//   - a report counts the milliseconds its thread lost, so a few hand-offs that each waited a
//     time slice (two pools sharing the cores) calm the pool;
//   - impossible parameters are refused.
#include "kernels/cpu/spin_governor.h"

#include <gtest/gtest.h>

#include "runtime/core/error.h"

namespace ssd::kernels {
namespace {

constexpr int64_t kMs = 1'000'000;

SpinGovernor::Params params() {
  return {.late_threshold = 3, .window_ns = 10 * kMs, .recheck_threshold = 3, .recheck_ns = kMs,
          .calm_min_ns = 2 * kMs, .calm_max_ns = 16 * kMs, .growth = 2,
          .calm_reset_ns = 100 * kMs};
}

// `n` late hand-offs in n consecutive milliseconds: t, t + 1 ms, ...
void burst(SpinGovernor& g, int n, int64_t t) {
  for (int i = 0; i < n; ++i) g.late(t + i * kMs);
}

TEST(SpinGovernor, FewLateHandOffsNeverStopSpinning) {
  SpinGovernor g(params());
  for (int w = 0; w < 1000; ++w) {  // two late hand-offs every 11 ms: never three in 10 ms
    burst(g, 2, w * 11 * kMs);
    ASSERT_TRUE(g.may_spin(w * 11 * kMs + kMs)) << "window " << w;
  }
  EXPECT_EQ(g.calms(), 0);
}

TEST(SpinGovernor, TheThresholdWithinAWindowCalmsForTheMinimumThenSpinsAgain) {
  SpinGovernor g(params());
  g.late(0);
  g.late(4 * kMs);
  EXPECT_TRUE(g.may_spin(4 * kMs));
  g.late(9 * kMs);  // the third within 10 ms of the first
  EXPECT_EQ(g.calms(), 1);
  EXPECT_FALSE(g.may_spin(9 * kMs));
  EXPECT_FALSE(g.may_spin(11 * kMs - 1));
  EXPECT_TRUE(g.may_spin(11 * kMs));
  EXPECT_EQ(g.last_calm_ns(), 2 * kMs);
  // Three late hand-offs spread over more than a window: no calm.
  SpinGovernor h(params());
  h.late(0);
  h.late(6 * kMs);
  h.late(11 * kMs);  // opens a new window
  EXPECT_EQ(h.calms(), 0);
}

TEST(SpinGovernor, PersistentContentionDoublesTheCalmUpToTheMaximumAndAQuietSpellResetsIt) {
  SpinGovernor g(params());
  int64_t t = 0;
  for (int64_t want : {2, 4, 8, 16, 16, 16}) {
    burst(g, 3, t);
    EXPECT_EQ(g.last_calm_ns(), want * kMs) << "at " << t / kMs << " ms";
    t = g.calm_until_ns() + kMs;  // spinning again 1 ms after the calm, contended at once
    ASSERT_TRUE(g.may_spin(t));
  }
  t += 150 * kMs;  // more than calm_reset without contention: the next calm is short again
  burst(g, 3, t);
  EXPECT_EQ(g.last_calm_ns(), 2 * kMs);
}

TEST(SpinGovernor, DefaultsMakeATransientBurstCostMilliseconds) {
  SpinGovernor g;  // 20 late milliseconds in 100 ms; calm 2 ms .. ~1 s
  burst(g, 20, 5 * kMs);  // the 20th at 24 ms
  EXPECT_FALSE(g.may_spin(25 * kMs));
  EXPECT_TRUE(g.may_spin(26 * kMs)) << "back to spinning 2 ms later";
  // Then the machine is quiet but for a late hand-off every 20 ms (an interrupt, a vCPU hiccup).
  for (int i = 0; i < 1000; ++i) g.late(26 * kMs + i * 20 * kMs);
  EXPECT_EQ(g.calms(), 1);
  EXPECT_TRUE(g.may_spin(30000 * kMs));
}

TEST(SpinGovernor, DefaultsReachTheLongestCalmQuicklyUnderPersistentContention) {
  SpinGovernor g;
  burst(g, 20, 0);
  int64_t t = 0;
  for (int64_t want : {8, 32, 128, 512, 1024, 1024}) {
    t = g.calm_until_ns() + kMs;
    ASSERT_TRUE(g.may_spin(t));
    burst(g, 3, t);
    EXPECT_TRUE(g.may_spin(t)) << "three late milliseconds are not enough, even after a calm";
    g.late(t + 2 * kMs + 1000);
    EXPECT_TRUE(g.may_spin(t)) << "nor a fourth late hand-off within the same millisecond";
    burst(g, 1, t + 3 * kMs);
    EXPECT_EQ(g.last_calm_ns(), want * kMs);
  }
  EXPECT_EQ(g.calms(), 7);
}

TEST(SpinGovernor, ShortBurstsOfOtherWorkNeverCalmButLosingMostMillisecondsDoes) {
  SpinGovernor g;
  for (int period = 0; period < 100; ++period) {  // 10 s: 3 ms of other work every 100 ms,
    const int64_t t0 = period * 100 * kMs;        // a late hand-off every 10 us during it
    for (int64_t t = t0; t < t0 + 3 * kMs; t += 10'000) g.late(t);
  }
  EXPECT_EQ(g.calms(), 0) << "3-4 late milliseconds per 100 ms is no contention";
  SpinGovernor h;
  int64_t t = 0;
  for (; h.calms() == 0 && t < 100 * kMs; t += 300'000) h.late(t);  // late in every millisecond
  EXPECT_EQ(h.calms(), 1);
  EXPECT_LE(t, 20 * kMs) << "the twentieth late millisecond calms the pool";
}

TEST(SpinGovernor, AFewHandOffsThatEachLostATimeSliceCalm) {
  SpinGovernor g;  // two pools sharing the cores: each hand-off waits a 4 ms time slice
  int reports = 0;
  for (int64_t t = 4 * kMs; g.calms() == 0 && t < 100 * kMs; t += 4 * kMs, ++reports)
    g.late(t, 4 * kMs);
  EXPECT_EQ(g.calms(), 1);
  EXPECT_EQ(reports, 5) << "5 reports of 4 lost milliseconds reach the 20";
  SpinGovernor h;  // the same time lost, reported twice (two threads): counted once
  h.late(10 * kMs, 4 * kMs);
  h.late(10 * kMs, 4 * kMs);
  h.late(20 * kMs, 4 * kMs);
  EXPECT_EQ(h.calms(), 0);
}

TEST(SpinGovernor, RefusesImpossibleParameters) {
  EXPECT_THROW(SpinGovernor({.late_threshold = 0}), Error);
  EXPECT_THROW(SpinGovernor({.window_ns = 0}), Error);
  EXPECT_THROW(SpinGovernor({.recheck_threshold = 0}), Error);
  EXPECT_THROW(SpinGovernor({.growth = 0}), Error);
  EXPECT_THROW(SpinGovernor({.calm_min_ns = 10, .calm_max_ns = 5}), Error);
  EXPECT_THROW(SpinGovernor({.bucket_ns = 0}), Error);
}

}  // namespace
}  // namespace ssd::kernels
