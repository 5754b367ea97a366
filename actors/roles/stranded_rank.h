// The end of a job that went on without a lost drafter rank (Cluster::end_past_lost_rank): the
// leader ends the job with MPI_Abort(0), but under Open MPI 4.1's recovery mode that did not end
// it while the lost rank's process still existed, stopped: the job then lasted until the
// surviving drafter lead's heartbeat watch fired, two --watchdog-s deadlines later (60 s at
// --watchdog-s 30, docs/faults.md). With the lost process gone first, the abort ends the job at
// once, as it does after a killed drafter. So the leader ends that process itself, when it can
// tell it is the lost rank's: on this host, with the pid the start-up gathered for that rank, and
// a child of the same launcher process as the leader (its parent is ours), so a pid the kernel
// gave to another process since is never touched.
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

namespace ssd {

// places: every rank's {rank, host, pid} (Cluster::rank_places()). Sends SIGKILL to `rank`'s
// process when it runs on this host, is not already dead, and its parent is `launcher` (default:
// this process's parent); then waits up to 2 s for it to be gone (a zombie counts as gone).
// Returns whether a signal was sent.
bool end_stranded_rank(const nlohmann::json& places, int rank, pid_t launcher = getppid());

}  // namespace ssd
