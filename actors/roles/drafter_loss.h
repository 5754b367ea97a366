// What the target leader does when it loses a drafter rank (--on-drafter-loss), and how it tells
// a dead drafter from a slow one.
//
// A drafter rank can die (crash, SIGKILL, OOM) or hang (SIGSTOP, a stuck device). Under Open MPI
// (4.1, ORTE) neither reaches the leader as an MPI error: its pending receive from the drafter just
// never matches, over shared memory and over TCP alike (docs/faults.md, "Recovery"). Without the
// launcher's recovery mode mpirun kills every rank when one dies, so the job ends there, naming
// the cause. With recovery mode (mpirun --enable-recovery, or launch/ssd-launch --recovery) the
// survivors live on, and the leader can finish the requests itself:
//
//   abort     (default without recovery mode) a drafter that misses its deadline ends the job
//             through the watchdog, as before.
//   continue  (auto picks it under recovery mode) the leader waits for the drafter lead in short
//             slices; between slices it looks at the drafter's process when the two share a host
//             (RankLiveness: gone -> "died" at once). At the step deadline (--watchdog-s) it gives
//             up on a silent drafter ("deadline expired while ..."). Either way it prints ONE line
//             (DrafterLoss::line) and finishes every sequence without the drafter ranks: under
//             --miss-at leader its copy of the drafter's lookup (leader_lookup.h: the primary's
//             when it is n-gram or suffix, else the backup speculator's) drafts every later
//             speculation, SD with a lookup drafter in the target's process; without one
//             (--miss-at drafter) every later round verifies an empty speculation, a plain
//             target decoding step. Either way the output stays the target's token for token
//             (sampled: its distribution); plain decoding is slower. Once the command has
//             written everything, the job ends with MPI_Abort(0) (Cluster::end_past_lost_rank):
//             Open MPI 4.1's MPI_Finalize can wait forever for the lost rank.
//
// A secondary drafter rank (ranks past the lead, draft-compute scaling) is lost the same way: the
// lead's answers wait for every rank's pre-speculation share (drafter_actor.h), so one lost rank
// stalls them all. The wait probes every drafter rank (DrafterLossPolicy::ranks), names the one
// that is gone or stopped, and the leader falls back as for a lost lead. (The
// lead carrying on with fewer ranks would need it to learn of the loss and re-split the branch
// plan mid-round; the fallback is simpler, and the output is the target's either way.)
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "actors/transport/transport.h"

namespace ssd {

// True when the launcher runs the job in its recovery mode: Open MPI exports
// OMPI_MCA_orte_enable_recovery=1 for `--enable-recovery` and `--mca orte_enable_recovery 1`
// (1, true, yes or on). A setting in an MCA parameter file is not visible to the rank: pass
// --on-drafter-loss continue then.
bool launcher_recovery_on();
// --on-drafter-loss auto|abort|continue -> whether the leader continues past a lost drafter.
bool continue_on_drafter_loss(const std::string& flag);

// What the local kernel says of a process (Linux /proc; other systems: kUnknown).
enum class ProcessState { kUnknown, kRunning, kStopped, kGone };
ProcessState local_process_state(int pid);

// Where every rank's process is ({rank, host, pid} per rank, as Cluster::rank_places() holds
// them on rank 0): the state of a rank's process when it runs on this host, else kUnknown.
class RankLiveness {
 public:
  RankLiveness() = default;
  explicit RankLiveness(const nlohmann::json& places);
  ProcessState state(int rank) const;

 private:
  std::vector<int> local_pid_;  // [ranks] pid when on this host, else -1
};

struct DrafterLossPolicy {
  bool continue_on_loss = false;
  // The state of a rank's process (default: always kUnknown, so only the deadline detects loss).
  std::function<ProcessState(int rank)> probe;
  // Every drafter rank the awaited answer depends on, probed in this order (the lead's answers
  // need every rank's share); empty: only the rank awaited.
  std::vector<int> ranks;
  std::chrono::milliseconds slice{100};  // how often the wait looks at the drafter's process
};

// What the leader finishes with when it has no lookup copy to draft with.
inline constexpr const char* kPlainDecoding = "plain decoding";
// What it finishes with when it drafts with its own copy of a lookup of `kind` ("n-gram",
// "suffix"): "the leader's n-gram drafts".
std::string lookup_fallback(const std::string& kind);

// One loss, as the leader reports it (the one stderr line, --stats-json "drafter_loss").
struct DrafterLoss {
  int rank = -1;
  int64_t round = -1;     // the round the leader was waiting for (-1: outside a round)
  bool died = false;      // its process is gone (else: the deadline expired)
  std::string cause;      // "died" / "deadline of 3 s expired while waiting for ..."
  // What the leader finishes with: kPlainDecoding, or "the leader's n-gram drafts" (its lookup
  // copy, DrafterLeadLink::drafts_after_loss).
  std::string fallback;

  std::string line() const;
  nlohmann::json to_json() const;
};

// Prints the loss's one line on stderr and marks it on the --trace-json timeline ("drafter rank
// N lost", an instant on the leader's track).
void report_loss(const DrafterLoss& loss);

// Thrown by wait_for_drafter when the drafter is lost under a continue policy; the leader
// catches it where it can fall back.
class DrafterLost : public Error {
 public:
  DrafterLost(int rank, bool died, std::string cause)
      : Error(cause), rank(rank), died(died), cause(std::move(cause)) {}
  int rank;
  bool died;
  std::string cause;
};

// The loss that ends a wait for ranks[0] (and the ranks after it, whose shares its answer needs)
// when nothing came within `deadline_s` while `what`: with probe_gone, the first rank whose
// process is gone ("died ..."); else a stopped one, or ranks[0], named by the expired deadline.
DrafterLost lost_at_deadline(const std::vector<int>& ranks, double deadline_s,
                             const DrafterLossPolicy& policy, const std::string& what,
                             bool probe_gone);

// Waits up to `deadline_s` for the next frame on `world` while drafter rank `drafter` is the one
// awaited (`what`: "waiting for the speculation of round 4"). Under an abort policy this is
// world.recv (a TransportTimeout at the deadline). Under a continue policy it polls in slices and
// throws DrafterLost when the process of the drafter, or of any rank in policy.ranks, is gone
// (naming that rank), or when the deadline passes (naming a stopped rank of policy.ranks if
// there is one, else `drafter`). Heartbeats (heartbeat.h) are passed over: a lead whose answer
// waits for a stopped rank's share still beats, and must not keep the wait alive.
Envelope wait_for_drafter(Transport& world, int drafter, double deadline_s,
                          const DrafterLossPolicy& policy, const std::string& what);

}  // namespace ssd
