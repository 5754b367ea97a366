// Fault injection for the fault matrix (tests/mpi/fault_matrix_test.cpp): one rank of a real job
// is made to fail at a named point, so that the test can check how the whole job ends.
//
//   SSD_FAULT=<role>:<fault>:<phase>[:round=N]
//     role   leader | worker | drafter | secondary   (target leader, TP worker, drafter lead,
//                                                     a drafter rank other than the lead)
//     fault  kill     the rank sends itself SIGKILL
//            stop     the rank sends itself SIGSTOP (a hang: only a watchdog ends the job)
//            error    the rank throws std::runtime_error at that point
//            corrupt  the rank sends its peer (leader -> drafter lead, worker and drafter lead
//                     -> leader, secondary -> drafter lead) a frame whose header is sound and
//                     whose head is 0xFF bytes (the sending transport checks headers only), and
//                     goes on; the receiver must refuse it, naming the sender
//     phase  startup  before the start-up handshake (after the transports are set up)
//            prefill  the rank's first prefill (leader: request 0; worker: its first forward;
//                     drafter ranks: starting the sequences, which prefills their drafter)
//            round    round N (default 1) in progress (leader: after sending round N's outcome;
//                     worker: its forward N + 1, the prefill being forward 0; drafter lead:
//                     answering round N; secondary: adopting the lead's round-N work)
//            prespec  pre-speculation of round N (drafter ranks: inside the drafting job; leader:
//                     verifying round N, while the drafter pre-speculates)
//            init     before MPI_Init (the role from the launcher's rank and --tp; stop there
//                     holds every other rank in MPI_Init until its deadline)
//
// The value is parsed once at start-up (launch/cli reads the variable) into a FaultPlan, a plain
// struct the roles receive; a malformed value is refused with the part that is wrong. Named
// fault points call FaultInjector::at(); nothing happens unless the plan names this rank's role,
// the point's phase and (for round and prespec) its round. Before acting the rank prints
//   "ssd: fault injection: rank R (role) <fault> <where> (steady clock T s)"
// on stderr, so a test can tell the injected fault from the job's reaction to it and time the
// job's end from it.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>

#include "actors/transport/rank_layout.h"
#include "actors/transport/transport.h"

namespace ssd {

enum class FaultRole : uint8_t { kLeader, kWorker, kDrafterLead, kSecondary };
enum class FaultKind : uint8_t { kKill, kStop, kError, kCorrupt };
enum class FaultPhase : uint8_t { kStartup, kPrefill, kRound, kPrespec, kInit };

struct FaultPlan {
  bool active = false;
  FaultRole role = FaultRole::kLeader;
  FaultKind kind = FaultKind::kError;
  FaultPhase phase = FaultPhase::kStartup;
  int64_t round = 1;  // for the round and prespec phases
};

// "" gives an inactive plan; anything else must be a whole valid value (ssd::Error otherwise,
// naming the part that is wrong and the choices).
FaultPlan parse_fault_plan(std::string_view text);

std::string_view fault_role_name(FaultRole role);  // "leader", "worker", ...
std::string_view fault_kind_name(FaultKind kind);
std::string_view fault_phase_name(FaultPhase phase);

// The fault role of a rank in `layout`.
FaultRole fault_role_of(const RankLayout& layout);

// The plan bound to this rank; it fires at most once. Default-constructed: never fires.
class FaultInjector {
 public:
  FaultInjector() = default;
  // world: the job's world transport (for a corrupted frame); may be set later.
  FaultInjector(const FaultPlan& plan, const RankLayout& layout, Transport* world = nullptr);
  FaultInjector(const FaultInjector&) = delete;
  FaultInjector& operator=(const FaultInjector&) = delete;
  void set_world(Transport* world) { world_ = world; }

  // A named fault point: `where` says what the rank is doing ("verifying round 1"). round is
  // ignored for the startup, prefill and init phases.
  void at(FaultPhase phase, int64_t round, std::string_view where) const;
  // Whether at(phase, round) would fire (for a point that must prepare, e.g. count calls).
  bool fires(FaultPhase phase, int64_t round) const;

 private:
  FaultPlan plan_;
  RankLayout layout_;
  Transport* world_ = nullptr;
  mutable std::atomic<bool> fired_{false};
};

}  // namespace ssd
