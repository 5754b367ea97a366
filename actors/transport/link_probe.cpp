#include "actors/transport/link_probe.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "runtime/core/error.h"

namespace ssd {
namespace {

using Clock = LinkProbeOptions::Clock;
constexpr int kBulkTries = 3;

// The leader's view of time and budget: its clock (real or injected) and the deadline of the
// part it is probing.
class Timer {
 public:
  explicit Timer(const LinkProbeOptions& o) : clock_(o.clock) {}
  Clock::time_point now() const { return clock_ ? clock_() : Clock::now(); }
  double since(Clock::time_point t0) const {
    return std::chrono::duration<double>(now() - t0).count();
  }
  // A deadline `seconds` from now; none (never past) when seconds <= 0.
  Clock::time_point after(double seconds) const {
    if (seconds <= 0) return Clock::time_point::max();
    return now() + std::chrono::duration_cast<Clock::duration>(
                       std::chrono::duration<double>(seconds));
  }
  bool past(Clock::time_point deadline) const {
    return deadline != Clock::time_point::max() && now() >= deadline;
  }

 private:
  std::function<Clock::time_point()> clock_;
};

// The next frame, within `wait_s`; past it the rank fails naming `what` it waited for.
Envelope receive(Transport& t, const std::string& what, double wait_s) {
  try {
    return t.recv(std::chrono::milliseconds(static_cast<int64_t>(wait_s * 1e3)));
  } catch (const TransportTimeout&) {
    throw Error(fmt::format("link probe: rank {} had no {} within {:.3g} s", t.rank(), what,
                            wait_s));
  }
}

Envelope expect(Transport& t, MsgKind kind, const std::string& what, double wait_s) {
  Envelope env = receive(t, what, wait_s);
  SSD_CHECK(env.kind == kind, "link probe: {} from rank {} while waiting for {}",
            kind_name(env.kind), env.peer, what);
  return env;
}

// Sizes of the bulk frames a probe sends.
std::vector<int64_t> bulk_sizes(bool quick) {
  if (quick) return {int64_t{1} << 20};
  return {int64_t{1} << 20, int64_t{64} << 20};
}
int bulk_reps(int64_t bytes, bool quick) { return bytes > (8 << 20) ? 2 : (quick ? 2 : 8); }

// The 8 B frame that opens a bandwidth try: how many bulk frames follow and their size in KiB.
struct BulkAnnounce {
  int32_t reps = 0;
  int32_t kib = 0;
};
static_assert(sizeof(BulkAnnounce) == 8);

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// One bandwidth try of `reps` frames of `bytes`: GB/s.
double bulk_try(Transport& t, int peer, const Timer& clock, int64_t bytes, int reps,
                double wait_s) {
  const BulkAnnounce head{reps, static_cast<int32_t>(bytes >> 10)};
  std::vector<std::byte> small(sizeof head);
  std::memcpy(small.data(), &head, sizeof head);
  const std::vector<std::byte> buf(static_cast<size_t>(bytes));
  // The 8 B frame and its ack: the round trip the bulk transfer's time also holds.
  auto t0 = clock.now();
  t.send_raw(peer, MsgKind::kRawBytes, small);
  expect(t, MsgKind::kPong,
         fmt::format("acknowledgement from rank {} of a {} KiB bandwidth try", peer, bytes >> 10),
         wait_s);
  const double t_small = clock.since(t0);
  t0 = clock.now();
  for (int r = 0; r < reps; ++r) t.send_raw(peer, MsgKind::kRawBytes, buf);
  expect(t, MsgKind::kPong,
         fmt::format("acknowledgement from rank {} of {} frames of {} KiB", peer, reps,
                     bytes >> 10),
         wait_s);
  const double t_bulk = clock.since(t0);
  // The transfer is the bulk time less that round trip; floored at 5% of the bulk time so a
  // stalled small exchange cannot make the estimate absurd (it is then at most 20x bytes/t).
  const double dt = std::max(t_bulk - t_small, 0.05 * t_bulk);
  return static_cast<double>(bytes) * reps / dt / 1e9;
}

// Probes one drafter rank until `deadline`: pings for the first half of the time left, bandwidth
// tries for the rest, none once the deadline has passed (the drafter's end Ping comes after every
// drafter's part: see probe_links). Without a deadline (ssd probe-links) every exchange is made,
// after 2 warm-up pings; with one, every exchange it can afford is a sample.
LinkFigures probe_peer(Transport& t, int peer, const LinkProbeOptions& o, const Timer& clock,
                       Clock::time_point deadline, bool& cut_short) {
  LinkFigures f;
  f.peer = peer;
  const bool budgeted = deadline != Clock::time_point::max();
  const Clock::time_point start = clock.now();
  const Clock::time_point ping_deadline = budgeted ? start + (deadline - start) / 2 : deadline;
  const int warmups = budgeted ? 0 : 2;
  std::vector<double> rtts;
  for (int i = 0; i < o.pings + warmups; ++i) {
    if (clock.past(ping_deadline)) {
      cut_short = true;
      break;
    }
    const auto t0 = clock.now();
    t.send(peer, Ping{static_cast<uint64_t>(i)});
    expect(t, MsgKind::kPong, fmt::format("Pong from rank {} to ping {}", peer, i), o.wait_s);
    if (i >= warmups) rtts.push_back(clock.since(t0));
  }
  f.pings = static_cast<int>(rtts.size());
  if (!rtts.empty()) f.latency_us = median(rtts) / 2 * 1e6;  // one way
  for (int64_t bytes : bulk_sizes(o.quick)) {
    std::vector<double> gbps;
    for (int k = 0; k < kBulkTries; ++k) {
      if (clock.past(deadline)) {
        cut_short = true;
        break;
      }
      gbps.push_back(bulk_try(t, peer, clock, bytes, bulk_reps(bytes, o.quick), o.wait_s));
    }
    const double g = gbps.empty() ? 0 : median(gbps);
    if (bytes == (int64_t{1} << 20)) {
      f.gbps_1mib = g;
      f.bulk_tries = static_cast<int>(gbps.size());
    } else {
      f.gbps_64mib = g;
    }
  }
  return f;
}

// A drafter rank's part: answers the leader's Pings and bandwidth tries until the end Ping. The
// frame that opens an exchange, or ends the probe, may come only after the leader has probed the
// other drafter ranks (those before it, or after it), so that wait is twice as long (the
// watchdog's deadline, at start-up); the frames within an exchange wait the plain wait.
void answer_leader(Transport& t, int leader, double wait_s) {
  for (;;) {
    Envelope env = receive(t, fmt::format("Ping or bandwidth try from the leader (rank {})", leader),
                           2 * wait_s);
    if (env.kind == MsgKind::kPing) {
      const Ping p = decode<Ping>(env);
      if (p.id == kProbeEndId) return;
      t.send(leader, Pong{p.id});
      continue;
    }
    SSD_CHECK(env.kind == MsgKind::kRawBytes,
              "link probe: {} from rank {} while waiting for a Ping or an 8 B frame",
              kind_name(env.kind), env.peer);
    BulkAnnounce head;
    SSD_CHECK(env.bulk().size() == sizeof head, "link probe: a frame of {} bytes, expected 8",
              env.bulk().size());
    std::memcpy(&head, env.bulk().data(), sizeof head);
    SSD_CHECK(head.reps > 0 && head.reps <= 64 && head.kib > 0 && head.kib <= (1 << 20),
              "link probe: a bandwidth try of {} frames of {} KiB (at most 64 of 1 GiB)", head.reps,
              head.kib);
    t.send(leader, Pong{0});
    const int64_t bytes = int64_t{head.kib} << 10;
    for (int r = 0; r < head.reps; ++r) {
      const Envelope bulk = expect(
          t, MsgKind::kRawBytes,
          fmt::format("bulk frame {} of {} from the leader (rank {})", r + 1, head.reps, leader),
          wait_s);
      SSD_CHECK(static_cast<int64_t>(bulk.bulk().size()) == bytes,
                "link probe: a bulk frame of {} bytes, expected {}", bulk.bulk().size(), bytes);
    }
    t.send(leader, Pong{0});
  }
}

// Collective over the TP group: the leader (TP rank 0) broadcasts whether another all-reduce
// follows (the first is an untimed warm-up), so its deadline stops every rank alike.
AllreduceFigures probe_allreduce(Collective& tp, const LinkProbeOptions& o, const Timer& clock,
                                 Clock::time_point deadline, bool& cut_short) {
  AllreduceFigures a;
  a.ranks = tp.size();
  const int64_t count = (o.quick ? (256 << 10) : o.allreduce_bytes) / 4;
  a.bytes = count * 4;
  std::vector<float> data(static_cast<size_t>(count), 1.0f);
  double best = 1e30;
  const int tries = o.quick ? 3 : 5;
  for (int i = 0;; ++i) {  // i = 0: the warm-up
    int32_t go = 0;
    if (tp.rank() == 0) {
      go = i <= tries && !clock.past(deadline);
      if (i <= tries && !go) cut_short = true;
    }
    tp.broadcast(&go, sizeof go, 0);  // start together, or stop together
    if (!go) break;
    const auto t0 = clock.now();
    tp.allreduce_sum(data.data(), count);
    if (i == 0) continue;
    best = std::min(best, clock.since(t0));
    ++a.samples;
  }
  if (a.samples == 0) return a;  // no figure: the budget was spent before one
  a.seconds = best;
  a.algbw_gbps = static_cast<double>(a.bytes) / best / 1e9;
  a.busbw_gbps = a.algbw_gbps * 2.0 * (a.ranks - 1) / a.ranks;
  return a;
}

}  // namespace

LinkProbeOptions LinkProbeOptions::startup(double watchdog_s) {
  LinkProbeOptions o;
  o.quick = true;
  o.budget_s = watchdog_s > 0 ? std::min(0.5, watchdog_s / 8) : 0.5;
  if (watchdog_s > 0) o.wait_s = watchdog_s / 2;
  return o;
}

LinkReport probe_links(Transport& world, Collective* tp, const RankLayout& layout,
                       const LinkProbeOptions& opts) {
  LinkReport rep;
  rep.transport = world.name();
  rep.quick = opts.quick;
  rep.budget_s = opts.budget_s;
  const Timer clock(opts);
  const int leader = layout.target_leader();
  const bool allreduce = tp && layout.is_target() && layout.tp > 1;
  // The budget is split evenly between the parts still to probe, each given its share of what
  // is left when it starts (a part that ends early leaves its time to the next).
  const Clock::time_point end = clock.after(opts.budget_s);
  int parts = static_cast<int>(layout.drafter_ranks().size()) + (allreduce ? 1 : 0);
  const auto part_deadline = [&] {
    if (end == Clock::time_point::max()) return end;
    const Clock::time_point now = clock.now();
    const int n = std::max(parts--, 1);
    return now >= end ? now : now + (end - now) / n;
  };
  if (layout.rank == leader) {
    for (int r : layout.drafter_ranks())
      rep.drafters.push_back(probe_peer(world, r, opts, clock, part_deadline(), rep.cut_short));
    // Every drafter rank leaves the probe only now: one let go after its own part would send the
    // leader its next message (the drafter lead's DrafterReady) while the leader still probes
    // the others, where only their answers are expected.
    for (int r : layout.drafter_ranks()) world.send(r, Ping{kProbeEndId});
  } else if (!layout.is_target()) {
    answer_leader(world, leader, opts.wait_s);
  }
  if (allreduce) {
    AllreduceFigures a = probe_allreduce(*tp, opts, clock, part_deadline(), rep.cut_short);
    if (layout.rank == leader) rep.allreduce = a;
  }
  return rep;
}

std::string LinkReport::summary() const {
  std::string s = fmt::format("links ({}{}):", transport, quick ? ", start-up probe" : "");
  for (const LinkFigures& f : drafters) {
    if (f.pings == 0) {
      s += fmt::format(" rank 0<->{} not measured;", f.peer);
      continue;
    }
    s += fmt::format(" rank 0<->{} {:.1f} us, 1 MiB {:.2f} GB/s", f.peer, f.latency_us,
                     f.gbps_1mib);
    if (f.gbps_64mib > 0) s += fmt::format(", 64 MiB {:.2f} GB/s", f.gbps_64mib);
    if (cut_short) s += fmt::format(" ({} pings, {} bandwidth tries)", f.pings, f.bulk_tries);
    s += ";";
  }
  if (allreduce.ranks > 1 && allreduce.samples == 0)
    s += fmt::format(" TP all-reduce ({} ranks) not measured", allreduce.ranks);
  else if (allreduce.ranks > 1)
    s += fmt::format(" TP all-reduce ({} ranks, {} KiB) busbw {:.2f} GB/s (algbw {:.2f})",
                     allreduce.ranks, allreduce.bytes >> 10, allreduce.busbw_gbps,
                     allreduce.algbw_gbps);
  if (drafters.empty() && allreduce.ranks <= 1) s += " none (one rank)";
  if (cut_short) s += fmt::format(" [cut at its {:.2g} s budget: fewer samples]", budget_s);
  return s;
}

nlohmann::json LinkReport::to_json() const {
  nlohmann::json j;
  j["transport"] = transport;
  j["quick"] = quick;
  j["budget_s"] = budget_s;
  j["cut_short"] = cut_short;
  j["drafters"] = nlohmann::json::array();
  for (const LinkFigures& f : drafters) {
    nlohmann::json d{{"peer", f.peer},         {"latency_us", f.latency_us},
                     {"gbps_1mib", f.gbps_1mib}, {"pings", f.pings},
                     {"bulk_tries", f.bulk_tries}};
    if (f.gbps_64mib > 0) d["gbps_64mib"] = f.gbps_64mib;
    j["drafters"].push_back(d);
  }
  if (allreduce.ranks > 1)
    j["tp_allreduce"] = {{"ranks", allreduce.ranks},
                         {"bytes", allreduce.bytes},
                         {"seconds", allreduce.seconds},
                         {"algbw_gbps", allreduce.algbw_gbps},
                         {"busbw_gbps", allreduce.busbw_gbps},
                         {"samples", allreduce.samples}};
  return j;
}

}  // namespace ssd
