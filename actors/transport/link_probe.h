// The links of a job, measured over the transports it runs on (MPI or NCCL, whichever carries the
// drafter link and the TP collectives), so a figure can say what the hardware gave:
//   latency    target leader <-> each drafter rank: half the median round trip of a Ping/Pong
//              (8 B of payload in a 32 B-header frame), over up to `pings` exchanges (after 2
//              warm-ups when there is no budget);
//   bandwidth  leader -> drafter, per try: an 8 B frame (it tells the drafter how many bulk frames
//              of what size follow) and its acknowledgement (time t_small), then `reps` raw
//              frames of S bytes (1 MiB; 64 MiB unless quick) and an acknowledgement (t_bulk);
//              GB/s = reps x S / (t_bulk - t_small), the difference floored at 5% of t_bulk (a
//              stalled small exchange cannot make it absurd); the median of up to 3 tries;
//   all-reduce the TP group's allreduce_sum of `allreduce_bytes` of floats, reported as
//              nccl-tests does: algbw = bytes / time, busbw = algbw x 2 (n - 1) / n (the traffic
//              each link carries in a ring), best of up to 5 after a warm-up.
// probe_links() is collective over every rank of the job: the leader probes each drafter rank in
// turn (the others wait), then ends every drafter's part at once, so no drafter rank sends the
// leader anything else while the probe runs; the TP ranks all-reduce together. The leader
// alone decides how many exchanges to make: a drafter answers whatever comes until the Ping whose
// id is kProbeEndId, and the TP ranks time another all-reduce only while the leader broadcasts
// "go". So a time budget is the leader's business.
//
// Quick mode with a budget is the start-up probe of every distributed run: a few ms on an idle
// machine, and under load (every ping waits for a time slice on an oversubscribed host) it stops
// at its budget, split evenly between the drafter ranks and the all-reduce (each part's share
// counted from when it starts: pings for its first half, bandwidth tries for the rest). Past the
// deadline no exchange starts: a part may get no sample at all (its figures are 0, "not
// measured"); the exchange in flight at the deadline and one end Ping per drafter rank are all
// the probe costs beyond the budget. The report says how many samples each part got.
// `ssd probe-links` has no budget: every exchange it asks for.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "actors/transport/rank_layout.h"
#include "actors/transport/transport.h"
#include "runtime/parallel/collective.h"

namespace ssd {

struct LinkFigures {
  int peer = 0;                // the drafter rank
  double latency_us = 0;       // one way: half the median round trip (0: not measured)
  double gbps_1mib = 0;        // GB/s (1e9 bytes/s) of 1 MiB frames (0: not measured)
  double gbps_64mib = 0;       // of 64 MiB frames; 0 when not measured (quick)
  int pings = 0;               // timed round trips behind latency_us (warm-ups not counted)
  int bulk_tries = 0;          // bandwidth tries behind gbps_1mib (each size gets as many)
};

struct AllreduceFigures {
  int ranks = 0;  // TP degree; 0: no TP group (T = 1)
  int64_t bytes = 0;
  double seconds = 0;  // best time of one all-reduce (0: not measured, samples = 0)
  double algbw_gbps = 0, busbw_gbps = 0;
  int samples = 0;  // timed all-reduces behind `seconds`
};

struct LinkReport {
  std::string transport;
  bool quick = true;
  double budget_s = 0;     // the leader's time budget (0: none)
  bool cut_short = false;  // some part stopped at the budget with fewer samples than asked for
  std::vector<LinkFigures> drafters;  // on the target leader; empty elsewhere
  AllreduceFigures allreduce;         // on the target leader
  std::string summary() const;        // one line: "links (mpi): rank 0<->1 12.3 us, ..."
  nlohmann::json to_json() const;
};

// A Ping with this id ends a drafter rank's part of the probe (ids count up from 0 otherwise).
inline constexpr uint64_t kProbeEndId = std::numeric_limits<uint64_t>::max();

struct LinkProbeOptions {
  using Clock = std::chrono::steady_clock;
  bool quick = true;
  int pings = 16;
  int64_t allreduce_bytes = 4 << 20;  // quick: 256 KiB
  // The leader's time budget in seconds, over every part of the probe (0: none). Past it the
  // leader starts no exchange; the one in flight completes.
  double budget_s = 0;
  // The clock the leader times and budgets with (null: steady_clock); tests inject one.
  std::function<Clock::time_point()> clock;
  // The longest wait for one frame of a peer, in seconds. Past it the rank fails with an error
  // naming the frame and the peer it waited for (the watchdog's line names only the phase).
  double wait_s = 60;

  // The start-up probe of a job whose watchdog deadline is watchdog_s (<= 0: none): quick, with
  // a budget of 0.5 s or an eighth of the deadline, whichever is less, and a wait per frame of
  // half the deadline (so a stuck exchange is named before the watchdog ends the job).
  static LinkProbeOptions startup(double watchdog_s);
};

// Collective over every rank of `world` (and over `tp` on target ranks; null when T = 1). How many
// exchanges are made is the leader's choice alone; the TP ranks must agree on `quick` and
// `allreduce_bytes` (the all-reduce's size), as every rank of a job resolves the same options.
LinkReport probe_links(Transport& world, Collective* tp, const RankLayout& layout,
                       const LinkProbeOptions& opts);

}  // namespace ssd
