#include "actors/transport/link_probe.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "runtime/core/error.h"

namespace ssd {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kWait = std::chrono::seconds(60);

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

Envelope expect(Transport& t, MsgKind kind, const char* what) {
  Envelope env = t.recv(kWait);
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
constexpr int kBulkTries = 3;

LinkFigures probe_peer(Transport& t, int peer, const LinkProbeOptions& o) {
  LinkFigures f;
  f.peer = peer;
  std::vector<double> rtts;
  for (int i = 0; i < o.pings + 2; ++i) {
    const auto t0 = Clock::now();
    t.send(peer, Ping{static_cast<uint64_t>(i)});
    expect(t, MsgKind::kPong, "a Pong");
    if (i >= 2) rtts.push_back(seconds_since(t0));
  }
  std::sort(rtts.begin(), rtts.end());
  const double one_way = rtts[rtts.size() / 2] / 2;
  f.latency_us = one_way * 1e6;
  const std::vector<std::byte> small(8);
  for (int64_t bytes : bulk_sizes(o.quick)) {
    const std::vector<std::byte> buf(static_cast<size_t>(bytes));
    const int reps = bulk_reps(bytes, o.quick);
    std::vector<double> gbps;
    for (int k = 0; k < kBulkTries; ++k) {
      // An 8 B frame and its ack: the round trip the bulk transfer's time also holds.
      auto t0 = Clock::now();
      t.send_raw(peer, MsgKind::kRawBytes, small);
      expect(t, MsgKind::kPong, "the acknowledgement");
      const double t_small = seconds_since(t0);
      t0 = Clock::now();
      for (int r = 0; r < reps; ++r) t.send_raw(peer, MsgKind::kRawBytes, buf);
      expect(t, MsgKind::kPong, "the bulk acknowledgement");
      const double t_bulk = seconds_since(t0);
      // The transfer is the bulk time less that round trip; floored at 5% of the bulk time so a
      // stalled small exchange cannot make the estimate absurd (it is then at most 20x bytes/t).
      const double dt = std::max(t_bulk - t_small, 0.05 * t_bulk);
      gbps.push_back(static_cast<double>(bytes) * reps / dt / 1e9);
    }
    std::sort(gbps.begin(), gbps.end());
    (bytes == (int64_t{1} << 20) ? f.gbps_1mib : f.gbps_64mib) = gbps[gbps.size() / 2];
  }
  return f;
}

void answer_leader(Transport& t, int leader, const LinkProbeOptions& o) {
  for (int i = 0; i < o.pings + 2; ++i) {
    const Ping p = decode<Ping>(expect(t, MsgKind::kPing, "a Ping"));
    t.send(leader, Pong{p.id});
  }
  for (int64_t bytes : bulk_sizes(o.quick))
    for (int k = 0; k < kBulkTries; ++k) {
      const Envelope small = expect(t, MsgKind::kRawBytes, "an 8 B frame");
      SSD_CHECK(small.bulk().size() == 8, "link probe: a frame of {} bytes, expected 8",
                small.bulk().size());
      t.send(leader, Pong{0});
      for (int r = 0; r < bulk_reps(bytes, o.quick); ++r) {
        const Envelope env = expect(t, MsgKind::kRawBytes, "a bulk frame");
        SSD_CHECK(static_cast<int64_t>(env.bulk().size()) == bytes,
                  "link probe: a bulk frame of {} bytes, expected {}", env.bulk().size(), bytes);
      }
      t.send(leader, Pong{0});
    }
}

AllreduceFigures probe_allreduce(Collective& tp, const LinkProbeOptions& o) {
  AllreduceFigures a;
  a.ranks = tp.size();
  const int64_t count = (o.quick ? (256 << 10) : o.allreduce_bytes) / 4;
  a.bytes = count * 4;
  std::vector<float> data(static_cast<size_t>(count), 1.0f);
  tp.allreduce_sum(data.data(), count);  // warm-up
  double best = 1e30;
  for (int i = 0; i < (o.quick ? 3 : 5); ++i) {
    int32_t go = 1;
    tp.broadcast(&go, sizeof go, 0);  // start together
    const auto t0 = Clock::now();
    tp.allreduce_sum(data.data(), count);
    best = std::min(best, seconds_since(t0));
  }
  a.seconds = best;
  a.algbw_gbps = static_cast<double>(a.bytes) / best / 1e9;
  a.busbw_gbps = a.algbw_gbps * 2.0 * (a.ranks - 1) / a.ranks;
  return a;
}

}  // namespace

LinkReport probe_links(Transport& world, Collective* tp, const RankLayout& layout,
                       const LinkProbeOptions& opts) {
  LinkReport rep;
  rep.transport = world.name();
  rep.quick = opts.quick;
  const int leader = layout.target_leader();
  if (layout.rank == leader) {
    for (int r : layout.drafter_ranks()) rep.drafters.push_back(probe_peer(world, r, opts));
  } else if (!layout.is_target()) {
    answer_leader(world, leader, opts);
  }
  if (tp && layout.is_target() && layout.tp > 1) {
    AllreduceFigures a = probe_allreduce(*tp, opts);
    if (layout.rank == leader) rep.allreduce = a;
  }
  return rep;
}

std::string LinkReport::summary() const {
  std::string s = fmt::format("links ({}{}):", transport, quick ? ", start-up probe" : "");
  for (const LinkFigures& f : drafters) {
    s += fmt::format(" rank 0<->{} {:.1f} us, 1 MiB {:.2f} GB/s", f.peer, f.latency_us,
                     f.gbps_1mib);
    if (f.gbps_64mib > 0) s += fmt::format(", 64 MiB {:.2f} GB/s", f.gbps_64mib);
    s += ";";
  }
  if (allreduce.ranks > 1)
    s += fmt::format(" TP all-reduce ({} ranks, {} KiB) busbw {:.2f} GB/s (algbw {:.2f})",
                     allreduce.ranks, allreduce.bytes >> 10, allreduce.busbw_gbps,
                     allreduce.algbw_gbps);
  if (drafters.empty() && allreduce.ranks <= 1) s += " none (one rank)";
  return s;
}

nlohmann::json LinkReport::to_json() const {
  nlohmann::json j;
  j["transport"] = transport;
  j["quick"] = quick;
  j["drafters"] = nlohmann::json::array();
  for (const LinkFigures& f : drafters) {
    nlohmann::json d{{"peer", f.peer}, {"latency_us", f.latency_us}, {"gbps_1mib", f.gbps_1mib}};
    if (f.gbps_64mib > 0) d["gbps_64mib"] = f.gbps_64mib;
    j["drafters"].push_back(d);
  }
  if (allreduce.ranks > 1)
    j["tp_allreduce"] = {{"ranks", allreduce.ranks},
                         {"bytes", allreduce.bytes},
                         {"seconds", allreduce.seconds},
                         {"algbw_gbps", allreduce.algbw_gbps},
                         {"busbw_gbps", allreduce.busbw_gbps}};
  return j;
}

}  // namespace ssd
