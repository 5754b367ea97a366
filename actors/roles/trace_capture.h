// --trace-json for a distributed run: the job's timeline from every rank in one Chrome
// trace-event file (runtime/core/trace.h). begin() estimates every rank's clock offset against
// rank 0 (ping-pong, clock_sync.h) and starts this rank's recorder; end() stops it, gathers every
// rank's events to rank 0 and writes the file there, each rank's times moved onto rank 0's clock.
// The file's metadata states the offsets, their uncertainty and how they were measured. Both
// calls are collective over the job's ranks, but for one case: once the leader has gone on
// without a lost drafter rank (Cluster::lost_rank, recovery mode), rank 0 writes its own events
// alone (the gather would wait for the lost rank), with "lost_rank" in the metadata and the loss
// as an instant on its timeline; the job then ends with MPI_Abort(0) (Cluster::end_past_lost_rank).
#pragma once

#include <string>
#include <vector>

#include "actors/roles/cluster.h"

namespace ssd {

class TraceCapture {
 public:
  TraceCapture(Cluster& cluster, std::string path);  // begin
  void finish();                                      // end: rank 0 writes the file

 private:
  Cluster& cluster_;
  std::string path_;
  std::vector<ClockOffset> offsets_;
  bool finished_ = false;
};

}  // namespace ssd
