// The link probe over the loopback transport, its ranks as threads: a quick probe with a time
// budget stops at it when every exchange is slow (a leader's clock that moves only by a set delay
// per receive and per all-reduce stands in for a loaded machine, so nothing here depends on wall
// time), with fewer samples than asked for (none for the parts that start past it), every rank
// finishing; with no budget, or a fast clock, it
// takes every sample (what `ssd probe-links` relies on); the TP all-reduce stops with the leader;
// a drafter refuses a malformed bandwidth announcement, naming it; no drafter rank leaves the
// probe, and speaks to the leader, before every drafter's part is done; a rank whose peer goes
// silent fails after its wait, naming the frame and the peer it waited for.
#include "actors/transport/link_probe.h"

#include <gtest/gtest.h>

#include <future>
#include <optional>
#include <thread>

#include "actors/transport/loopback_transport.h"
#include "runtime/core/error.h"
#include "runtime/parallel/thread_collective.h"

namespace ssd {
namespace {

using Clock = LinkProbeOptions::Clock;

// A loaded machine as the leader sees it: a clock that stands still but for the leader's
// receives and all-reduces, each of which takes `delay` (every exchange is slow; nothing here
// waits in wall time, and the numbers of samples below follow from the delays alone).
struct SlowClock {
  std::shared_ptr<Clock::time_point> now = std::make_shared<Clock::time_point>();
  std::chrono::milliseconds delay{0};
  std::function<Clock::time_point()> reader() const {
    return [now = now] { return *now; };
  }
  void pass() const { *now += delay; }
  double seconds() const { return std::chrono::duration<double>(now->time_since_epoch()).count(); }
};

class SlowLink final : public Transport {
 public:
  SlowLink(Transport& t, const SlowClock& clock) : t_(t), clock_(clock) {}
  int rank() const override { return t_.rank(); }
  int size() const override { return t_.size(); }
  std::string name() const override { return t_.name(); }
  std::optional<Envelope> try_recv() override { return t_.try_recv(); }
  Envelope recv(std::chrono::milliseconds timeout) override {
    Envelope env = t_.recv(timeout);
    clock_.pass();
    return env;
  }
  void send_frame(int peer, std::vector<std::byte> frame) override {
    t_.send_frame(peer, std::move(frame));
  }
  size_t pending_sends() override { return t_.pending_sends(); }

 private:
  Transport& t_;
  SlowClock clock_;
};

class SlowCollective final : public Collective {
 public:
  SlowCollective(Collective& c, const SlowClock& clock) : c_(c), clock_(clock) {}
  int rank() const override { return c_.rank(); }
  int size() const override { return c_.size(); }
  void allreduce_sum(float* data, int64_t count) override {
    c_.allreduce_sum(data, count);
    clock_.pass();
  }
  void allgatherv(const float* in, const int64_t* counts, float* out) override {
    c_.allgatherv(in, counts, out);
  }
  void broadcast(void* data, int64_t bytes, int root) override { c_.broadcast(data, bytes, root); }

 private:
  Collective& c_;
  SlowClock clock_;
};

// Runs probe_links on every rank of a world of `world` ranks (TP degree `tp`) as threads; the
// leader with `leader_opts` over a link and all-reduce that take `delay` each (its clock is the
// slow one then), the others with defaults. Returns the leader's report; every other rank's thread
// must finish (a rank left waiting would end the test by its 60 s receive deadline).
LinkReport probe_world(int world, int tp, LinkProbeOptions leader_opts, const SlowClock& slow) {
  LoopbackHub hub(world);
  ThreadGroup group(tp);
  std::vector<std::future<void>> others;
  for (int r = 1; r < world; ++r)
    others.push_back(std::async(std::launch::async, [&, r] {
      const RankLayout layout = RankLayout::make(world, r, tp);
      Collective* c = layout.is_target() && tp > 1 ? &group.member(r) : nullptr;
      probe_links(hub.endpoint(r), c, layout, LinkProbeOptions{});
    }));
  SlowLink link(hub.endpoint(0), slow);
  std::optional<SlowCollective> tp_group;
  if (tp > 1) tp_group.emplace(group.member(0), slow);
  leader_opts.clock = slow.reader();
  LinkReport rep = probe_links(link, tp_group ? &*tp_group : nullptr,
                               RankLayout::make(world, 0, tp), leader_opts);
  for (auto& f : others) f.get();  // finished, and rethrows a rank's error
  return rep;
}

SlowClock slow_by(std::chrono::milliseconds delay) {
  SlowClock c;
  c.delay = delay;
  return c;
}

TEST(LinkProbe, StopsAtItsBudgetWithFewerSamplesWhenEveryExchangeIsSlow) {
  LinkProbeOptions o;  // quick: up to 16 pings, 3 bandwidth tries
  o.budget_s = 1.0;
  const SlowClock slow = slow_by(std::chrono::milliseconds(200));
  const LinkReport rep = probe_world(2, 1, o, slow);
  ASSERT_EQ(rep.drafters.size(), 1u);
  const LinkFigures& f = rep.drafters[0];
  EXPECT_TRUE(rep.cut_short);
  // One part with the whole second: pings until 0.5 s (at 0, 0.2, 0.4 s), then bandwidth tries
  // until 1 s (one, 2 receives: 0.6 to 1.0 s); nothing starts past the budget.
  EXPECT_EQ(f.pings, 3);
  EXPECT_EQ(f.bulk_tries, 1);
  EXPECT_NEAR(f.latency_us, 0.2 / 2 * 1e6, 1);
  EXPECT_GT(f.gbps_1mib, 0);
  EXPECT_NEAR(slow.seconds(), 1.0, 1e-9) << "the probe ran past its budget";
  EXPECT_NE(rep.summary().find("(3 pings, 1 bandwidth tries)"), std::string::npos)
      << rep.summary();
  EXPECT_NE(rep.summary().find("cut at its 1 s budget"), std::string::npos) << rep.summary();
  EXPECT_EQ(rep.to_json()["drafters"][0]["pings"], 3);
}

TEST(LinkProbe, TakesEverySampleWhenExchangesAreFast) {
  LinkProbeOptions o;
  o.budget_s = 1.0;
  const LinkReport rep = probe_world(2, 1, o, slow_by(std::chrono::milliseconds(1)));
  ASSERT_EQ(rep.drafters.size(), 1u);
  EXPECT_FALSE(rep.cut_short);
  EXPECT_EQ(rep.drafters[0].pings, 16);
  EXPECT_EQ(rep.drafters[0].bulk_tries, 3);
  EXPECT_EQ(rep.summary().find("budget"), std::string::npos) << rep.summary();
}

TEST(LinkProbe, WithoutABudgetTakesEverySampleHoweverSlow) {
  LinkProbeOptions o;  // what `ssd probe-links` passes: no budget
  o.pings = 24;
  const LinkReport rep = probe_world(3, 1, o, slow_by(std::chrono::milliseconds(1000)));
  ASSERT_EQ(rep.drafters.size(), 2u);
  EXPECT_FALSE(rep.cut_short);
  for (const LinkFigures& f : rep.drafters) {
    EXPECT_EQ(f.pings, 24) << "rank " << f.peer;
    EXPECT_EQ(f.bulk_tries, 3) << "rank " << f.peer;
  }
}

TEST(LinkProbe, TheAllreduceStopsWithTheLeader) {
  LinkProbeOptions o;
  o.budget_s = 2.0;
  // Two parts of 1 s: the drafter's (pings at 0 and 0.3 s, one bandwidth try to 1.2 s), then the
  // all-reduce's, to 2 s: the warm-up to 1.5 s, timed ones to 1.8 and 2.1 s; then it stops.
  const LinkReport cut = probe_world(3, 2, o, slow_by(std::chrono::milliseconds(300)));
  EXPECT_TRUE(cut.cut_short);
  EXPECT_EQ(cut.allreduce.ranks, 2);
  EXPECT_EQ(cut.allreduce.samples, 2);
  EXPECT_NEAR(cut.allreduce.seconds, 0.3, 1e-9);
  EXPECT_GT(cut.allreduce.busbw_gbps, 0);

  const LinkReport full = probe_world(3, 2, o, slow_by(std::chrono::milliseconds(1)));
  EXPECT_FALSE(full.cut_short);
  EXPECT_EQ(full.allreduce.samples, 3);
}

// Exchanges of a whole second against a budget of one: the first drafter's part gets the ping
// it started within its share; past the budget no exchange starts, so the second drafter and the
// all-reduce get no sample ("not measured"); every rank still finishes its part.
TEST(LinkProbe, OnceTheBudgetIsSpentLaterPartsTakeNoSample) {
  LinkProbeOptions o;
  o.budget_s = 1.0;
  const LinkReport rep = probe_world(4, 2, o, slow_by(std::chrono::milliseconds(1000)));
  ASSERT_EQ(rep.drafters.size(), 2u);  // ranks 0-1 TP, ranks 2-3 drafters
  EXPECT_TRUE(rep.cut_short);
  EXPECT_EQ(rep.drafters[0].pings, 1);
  EXPECT_EQ(rep.drafters[0].bulk_tries, 0);
  EXPECT_EQ(rep.drafters[0].gbps_1mib, 0);
  EXPECT_EQ(rep.drafters[1].pings, 0);
  EXPECT_EQ(rep.drafters[1].latency_us, 0);
  EXPECT_EQ(rep.allreduce.samples, 0);
  EXPECT_EQ(rep.allreduce.busbw_gbps, 0);
  const std::string line = rep.summary();
  EXPECT_NE(line.find("rank 0<->3 not measured"), std::string::npos) << line;
  EXPECT_NE(line.find("TP all-reduce (2 ranks) not measured"), std::string::npos) << line;
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
  // A frame is waited for half the watchdog's deadline, so the probe names a stuck exchange
  // before the watchdog ends the job naming only its phase.
  EXPECT_DOUBLE_EQ(LinkProbeOptions::startup(60).wait_s, 30);
  EXPECT_DOUBLE_EQ(LinkProbeOptions::startup(0).wait_s, 60);
}

// What a rank that waits past wait_s says: which frame from which rank.
std::string probe_error(int rank, const LinkProbeOptions& o) {
  LoopbackHub hub(2);  // the other rank never takes part
  try {
    probe_links(hub.endpoint(rank), nullptr, RankLayout::make(2, rank, 1), o);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

// A transport whose sends each take `delay` of wall time first (a drafter slow to answer).
class LateSender final : public Transport {
 public:
  LateSender(Transport& t, std::chrono::milliseconds delay) : t_(t), delay_(delay) {}
  int rank() const override { return t_.rank(); }
  int size() const override { return t_.size(); }
  std::string name() const override { return t_.name(); }
  std::optional<Envelope> try_recv() override { return t_.try_recv(); }
  void send_frame(int peer, std::vector<std::byte> frame) override {
    std::this_thread::sleep_for(delay_);
    t_.send_frame(peer, std::move(frame));
  }
  size_t pending_sends() override { return t_.pending_sends(); }

 private:
  Transport& t_;
  std::chrono::milliseconds delay_;
};

// The drafter lead (rank 1) sends the leader its next message as soon as its probe ends, as a
// job's DrafterReady does, while a second drafter (rank 2) answers slowly: the leader's probe of
// rank 2 must not see rank 1's message (it failed with "DrafterReady from rank 1 while waiting
// for acknowledgement from rank 2" under mpirun when rank 1 was let go after its own part), and
// the message must still reach the leader after the probe.
TEST(LinkProbe, NoDrafterRankSpeaksToTheLeaderBeforeEveryPartIsDone) {
  LoopbackHub hub(3);
  LinkProbeOptions o;  // quick, no budget: every exchange, each of rank 2's answers 5 ms late
  o.quick = true;
  o.pings = 4;
  auto lead = std::async(std::launch::async, [&] {
    probe_links(hub.endpoint(1), nullptr, RankLayout::make(3, 1, 1), o);
    hub.endpoint(1).send(0, Ping{7});
  });
  auto second = std::async(std::launch::async, [&] {
    LateSender late(hub.endpoint(2), std::chrono::milliseconds(5));
    probe_links(late, nullptr, RankLayout::make(3, 2, 1), o);
  });
  const LinkReport rep = probe_links(hub.endpoint(0), nullptr, RankLayout::make(3, 0, 1), o);
  lead.get();
  second.get();
  ASSERT_EQ(rep.drafters.size(), 2u);
  EXPECT_EQ(rep.drafters[1].pings, 4);
  const Envelope after = hub.endpoint(0).recv(std::chrono::milliseconds(5000));
  EXPECT_EQ(after.peer, 1);
  EXPECT_EQ(decode<Ping>(after).id, 7u);
}

TEST(LinkProbe, ASilentDrafterIsNamedByTheFrameTheLeaderWaitedFor) {
  LinkProbeOptions o;
  o.wait_s = 0.05;
  const std::string e = probe_error(0, o);
  EXPECT_NE(e.find("link probe: rank 0 had no Pong from rank 1 to ping 0 within 0.05 s"),
            std::string::npos)
      << e;
}

TEST(LinkProbe, ASilentLeaderIsNamedByTheDrafterWaitingForIt) {
  LinkProbeOptions o;
  o.wait_s = 0.05;
  const std::string e = probe_error(1, o);
  // Its first frame may wait for the probes of the drafter ranks before it: twice the wait.
  EXPECT_NE(e.find("link probe: rank 1 had no Ping or bandwidth try from the leader (rank 0) "
                   "within 0.1 s"),
            std::string::npos)
      << e;
}

}  // namespace
}  // namespace ssd
