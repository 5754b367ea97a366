// The link probe over the loopback transport, its ranks as threads: a quick probe with a time
// budget stops at it when every exchange is slow (an injected clock that moves 100 ms per reading
// stands in for a loaded machine, so nothing here depends on wall time), with fewer samples than
// asked for, at least one of each, and every rank finishing; with no budget, or a fast clock, it
// takes every sample (what `ssd probe-links` relies on); the TP all-reduce stops with the leader;
// a drafter refuses a malformed bandwidth announcement, naming it.
#include "actors/transport/link_probe.h"

#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "actors/transport/loopback_transport.h"
#include "runtime/core/error.h"
#include "runtime/parallel/thread_collective.h"

namespace ssd {
namespace {

using Clock = LinkProbeOptions::Clock;

// A clock that moves `step` forward at every reading: each exchange the leader times "takes"
// two readings' worth.
std::function<Clock::time_point()> stepping_clock(std::chrono::microseconds step) {
  auto t = std::make_shared<Clock::time_point>();
  return [t, step] { return *t += step; };
}

double fake_seconds(const std::function<Clock::time_point()>& clock) {
  return std::chrono::duration<double>(clock().time_since_epoch()).count();
}

// Runs probe_links on every rank of a world of `world` ranks (TP degree `tp`) as threads; the
// leader with `leader_opts`, the others with defaults. Returns the leader's report; every other
// rank's thread must finish (a rank left waiting would hang the test: bounded by its 60 s recv).
LinkReport probe_world(int world, int tp, const LinkProbeOptions& leader_opts) {
  LoopbackHub hub(world);
  ThreadGroup group(tp);
  std::vector<std::future<void>> others;
  for (int r = 1; r < world; ++r)
    others.push_back(std::async(std::launch::async, [&, r] {
      const RankLayout layout = RankLayout::make(world, r, tp);
      Collective* c = layout.is_target() && tp > 1 ? &group.member(r) : nullptr;
      probe_links(hub.endpoint(r), c, layout, LinkProbeOptions{});
    }));
  Collective* c = tp > 1 ? &group.member(0) : nullptr;
  LinkReport rep = probe_links(hub.endpoint(0), c, RankLayout::make(world, 0, tp), leader_opts);
  for (auto& f : others) f.get();  // finished, and rethrows a rank's error
  return rep;
}

TEST(LinkProbe, StopsAtItsBudgetWithFewerSamplesWhenEveryExchangeIsSlow) {
  LinkProbeOptions o;  // quick: up to 16 pings, 3 bandwidth tries
  o.budget_s = 1.0;
  o.clock = stepping_clock(std::chrono::milliseconds(100));
  const LinkReport rep = probe_world(2, 1, o);
  // Where the clock stands now: readings past the budget are the minimum work and the exchange
  // in flight at the deadline (one bandwidth try: 4 readings).
  const double elapsed = fake_seconds(o.clock);
  ASSERT_EQ(rep.drafters.size(), 1u);
  const LinkFigures& f = rep.drafters[0];
  EXPECT_TRUE(rep.cut_short);
  EXPECT_GE(f.pings, 1);
  EXPECT_LT(f.pings, o.pings);
  EXPECT_GE(f.bulk_tries, 1);
  EXPECT_LT(f.bulk_tries, 3);
  EXPECT_GT(f.latency_us, 0);
  EXPECT_GT(f.gbps_1mib, 0);
  EXPECT_LE(elapsed, o.budget_s + 0.5) << "the probe ran past its budget by more than one try";
  EXPECT_NE(rep.summary().find("cut at its 1 s budget"), std::string::npos) << rep.summary();
  EXPECT_EQ(rep.to_json()["drafters"][0]["pings"], f.pings);
}

TEST(LinkProbe, TakesEverySampleWhenExchangesAreFast) {
  LinkProbeOptions o;
  o.budget_s = 1.0;
  o.clock = stepping_clock(std::chrono::microseconds(10));
  const LinkReport rep = probe_world(2, 1, o);
  ASSERT_EQ(rep.drafters.size(), 1u);
  EXPECT_FALSE(rep.cut_short);
  EXPECT_EQ(rep.drafters[0].pings, 16);
  EXPECT_EQ(rep.drafters[0].bulk_tries, 3);
  EXPECT_EQ(rep.summary().find("budget"), std::string::npos) << rep.summary();
}

TEST(LinkProbe, WithoutABudgetTakesEverySampleHoweverSlow) {
  LinkProbeOptions o;  // what `ssd probe-links` passes: no budget
  o.pings = 24;
  o.clock = stepping_clock(std::chrono::milliseconds(100));
  const LinkReport rep = probe_world(3, 1, o);
  ASSERT_EQ(rep.drafters.size(), 2u);
  EXPECT_FALSE(rep.cut_short);
  for (const LinkFigures& f : rep.drafters) {
    EXPECT_EQ(f.pings, 24) << "rank " << f.peer;
    EXPECT_EQ(f.bulk_tries, 3) << "rank " << f.peer;
  }
}

TEST(LinkProbe, TheAllreduceStopsWithTheLeader) {
  LinkProbeOptions slow;
  slow.budget_s = 1.0;
  slow.clock = stepping_clock(std::chrono::milliseconds(100));
  const LinkReport cut = probe_world(3, 2, slow);  // ranks 0-1 TP, rank 2 drafter
  EXPECT_TRUE(cut.cut_short);
  EXPECT_EQ(cut.allreduce.ranks, 2);
  EXPECT_GE(cut.allreduce.samples, 1);
  EXPECT_LT(cut.allreduce.samples, 3);
  EXPECT_GT(cut.allreduce.busbw_gbps, 0);

  LinkProbeOptions fast;
  fast.budget_s = 1.0;
  fast.clock = stepping_clock(std::chrono::microseconds(10));
  const LinkReport full = probe_world(3, 2, fast);
  EXPECT_FALSE(full.cut_short);
  EXPECT_EQ(full.allreduce.samples, 3);
}

TEST(LinkProbe, ADrafterRefusesAMalformedBandwidthAnnouncement) {
  LoopbackHub hub(2);
  const std::vector<std::byte> five(5);
  hub.endpoint(0).send_raw(1, MsgKind::kRawBytes, five);
  try {
    probe_links(hub.endpoint(1), nullptr, RankLayout::make(2, 1, 1), LinkProbeOptions{});
    FAIL() << "a 5 B announcement was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("a frame of 5 bytes, expected 8"), std::string::npos)
        << e.what();
  }
}

TEST(LinkProbe, StartUpBudgetIsHalfASecondOrAnEighthOfTheWatchdog) {
  EXPECT_DOUBLE_EQ(LinkProbeOptions::startup(8).budget_s, 0.5);
  EXPECT_DOUBLE_EQ(LinkProbeOptions::startup(2).budget_s, 0.25);
  EXPECT_DOUBLE_EQ(LinkProbeOptions::startup(0).budget_s, 0.5);
  EXPECT_TRUE(LinkProbeOptions::startup(8).quick);
}

}  // namespace
}  // namespace ssd
