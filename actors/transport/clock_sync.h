// One clock for a job's timeline: each rank's steady clock against rank 0's, estimated at
// start-up by ping-pong (the NTP/Cristian estimate): rank 0 sends at t0, the peer stamps t1 and
// answers, rank 0 receives at t2; offset = t1 - (t0 + t2) / 2, exact within +-(t2 - t0) / 2. Of
// `tries` exchanges the one with the smallest round trip is kept (the least queueing, the
// tightest bound). On one node every process reads the same CLOCK_MONOTONIC, so the true offset
// is 0 and the estimate must fall within its uncertainty (tested).
//
// Also the end-of-run gather of every rank's recorded events to rank 0, as text.
#pragma once

#include <string>
#include <vector>

#include "actors/transport/mpi_world.h"

namespace ssd {

struct ClockOffset {
  double offset_us = 0;       // this rank's clock minus rank 0's
  double uncertainty_us = 0;  // half the best round trip: |true offset - offset_us| <= this
  double rtt_us = 0;
};

// Collective over comm. On rank 0: one entry per rank (rank 0's own is zero); elsewhere empty.
std::vector<ClockOffset> estimate_clock_offsets(const MpiComm& comm, int tries = 16);

// Collective over comm: every rank's `text`, on rank 0 (in rank order); elsewhere empty.
std::vector<std::string> gather_text(const MpiComm& comm, const std::string& text);

}  // namespace ssd
