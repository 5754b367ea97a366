// The links of a job, measured over the transports it runs on (MPI or NCCL, whichever carries the
// drafter link and the TP collectives), so a figure can say what the hardware gave:
//   latency    target leader <-> each drafter rank: half the median round trip of a Ping/Pong
//              (8 B of payload in a 32 B-header frame), over `pings` exchanges after 2 warm-ups;
//   bandwidth  leader -> drafter, per try: an 8 B frame and its acknowledgement (time t_small),
//              then `reps` raw frames of S bytes (1 MiB; 64 MiB unless quick) and an
//              acknowledgement (t_bulk); GB/s = reps x S / (t_bulk - t_small), the difference
//              floored at 5% of t_bulk (a stalled small exchange cannot make it absurd); the
//              median of 3 tries;
//   all-reduce the TP group's allreduce_sum of `allreduce_bytes` of floats, reported as
//              nccl-tests does: algbw = bytes / time, busbw = algbw x 2 (n - 1) / n (the traffic
//              each link carries in a ring), best of 5 after a warm-up.
// probe_links() is collective over every rank of the job: the leader probes each drafter rank in
// turn (the others wait for their turn or return), the TP ranks all-reduce together. Quick mode
// (the start-up probe of every distributed run) takes a few ms: no 64 MiB transfer, fewer repeats.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "actors/transport/rank_layout.h"
#include "actors/transport/transport.h"
#include "runtime/parallel/collective.h"

namespace ssd {

struct LinkFigures {
  int peer = 0;                // the drafter rank
  double latency_us = 0;       // one way: half the median round trip
  double gbps_1mib = 0;        // GB/s (1e9 bytes/s) of 1 MiB frames
  double gbps_64mib = 0;       // of 64 MiB frames; 0 when not measured (quick)
};

struct AllreduceFigures {
  int ranks = 0;  // TP degree; 0: no TP group (T = 1)
  int64_t bytes = 0;
  double seconds = 0;  // best time of one all-reduce
  double algbw_gbps = 0, busbw_gbps = 0;
};

struct LinkReport {
  std::string transport;
  bool quick = true;
  std::vector<LinkFigures> drafters;  // on the target leader; empty elsewhere
  AllreduceFigures allreduce;         // on the target leader
  std::string summary() const;        // one line: "links (mpi): rank 0<->1 12.3 us, ..."
  nlohmann::json to_json() const;
};

struct LinkProbeOptions {
  bool quick = true;
  int pings = 16;
  int64_t allreduce_bytes = 4 << 20;  // quick: 256 KiB
};

// Collective over every rank of `world` (and over `tp` on target ranks; null when T = 1).
LinkReport probe_links(Transport& world, Collective* tp, const RankLayout& layout,
                       const LinkProbeOptions& opts);

}  // namespace ssd
