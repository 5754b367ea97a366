// A process's place in the job, decided once at start-up and passed down: when started by a
// launcher (mpirun, srun) it initialises MPI, builds the rank layout (ranks 0..T-1 target,
// T..N-1 drafters), splits the communicators, starts the watchdog and runs the start-up handshake
// (protocol version, configuration and model digests: a mismatch ends the job on every rank with
// both values named). Started by hand it is a world of one with no MPI call at all, which is what
// `ssd generate --mode ar|sd` on one process is.
#pragma once

#include <memory>
#include <string_view>

#include "actors/roles/fault_injection.h"
#include "actors/roles/gpu_link.h"
#include "actors/transport/clock_sync.h"
#include "actors/transport/link_probe.h"
#include "actors/transport/rank_layout.h"
#include "actors/transport/startup_agreement.h"
#include "actors/transport/transport.h"
#include "actors/transport/watchdog.h"
#include "runtime/parallel/collective.h"

namespace ssd {

class MpiSession;
class MpiWorld;

class Cluster {
 public:
  static constexpr double kMinInitWaitS = 60;

  // config_text: the resolved flags (identical on every rank, or the handshake refuses the job);
  // model_path: the model every rank must have loaded the same (empty: no model, e.g. probe-links) (its size and header bytes are
  // hashed into the model digest). watchdog_s: the deadline of the handshake, and of MPI_Init
  // (at least kMinInitWaitS: a rank stopped before it ends the job; mpi_world.h). gpu: the transport
  // and device placement flags (gpu_link.h), resolved and checked on every rank. startup: the
  // flags that shape the start-up collectives (--tp, --transport, ...), compared by the very
  // first collective (startup_agreement.h) under the watchdog; tp is always among them. fault:
  // the fault-injection plan (fault_injection.h), bound to this rank as faults().
  Cluster(int tp, std::string_view config_text, std::string_view model_path, double watchdog_s,
          const GpuLinkOptions& gpu = {}, std::vector<StartupField> startup = {},
          const FaultPlan& fault = {});
  ~Cluster();
  Cluster(const Cluster&) = delete;
  Cluster& operator=(const Cluster&) = delete;

  const RankLayout& layout() const { return layout_; }
  bool distributed() const { return layout_.world > 1; }
  // The TP group's collective on target ranks when T > 1; null otherwise.
  Collective* tp_group();
  // Every rank of the job (the leader <-> drafter link); null on a world of one.
  Transport* world() { return world_.get(); }
  Watchdog& dog() { return *dog_; }
  // This rank's fault points (inactive unless SSD_FAULT named a fault).
  const FaultInjector& faults() const { return *faults_; }
  // The job's backend (CUDA only when every rank resolved it), this rank's CUDA device (-1 when
  // no GPU is used) and the transport ("mpi" / "nccl").
  const GpuPlacement& placement() const { return placement_; }
  // The links as measured at start-up (link_probe.h, quick): on rank 0, every drafter rank's
  // latency and bandwidth and the TP group's all-reduce bus bandwidth.
  const LinkReport& links() const { return links_; }
  // On rank 0: where every rank runs, [{rank, host, pid, cpus (its affinity), device (-1:
  // none)}].
  const nlohmann::json& rank_places() const { return places_; }
  // Collective over every rank (nothing on a world of one): each rank's clock against rank 0's
  // (clock_sync.h), on rank 0; empty elsewhere.
  std::vector<ClockOffset> clock_offsets();
  // Collective: every rank's `text` on rank 0 in rank order (a world of one: its own).
  std::vector<std::string> gather_text(const std::string& text);
  // Tells the other ranks this rank failed (best effort) and ends the job with `what`.
  [[noreturn]] void abort(const std::string& what);
  // A rank the job went on without (a drafter lost under recovery mode). Open MPI 4.1's
  // MPI_Finalize waits for it: always for a stopped process, now and then for a killed one
  // (docs/faults.md, "Recovery"). So once the command is done the job ends through
  // end_past_lost_rank() instead.
  void mark_lost(int rank) { lost_rank_ = rank; }
  int lost_rank() const { return lost_rank_; }  // -1: none (on rank 0, once the job knows)
  // With a rank marked: flushes stdout and stderr, says why in one line and ends the job with
  // MPI_Abort(0) (mpirun then ends every rank; the command's work is complete). Else nothing.
  void end_past_lost_rank();

 private:
  RankLayout layout_;
  std::unique_ptr<MpiSession> session_;
  std::unique_ptr<MpiWorld> mpi_;
  std::unique_ptr<Transport> world_;
  std::unique_ptr<Collective> tp_;
  GpuPlacement placement_;
  std::unique_ptr<Watchdog> dog_;
  std::unique_ptr<FaultInjector> faults_;
  LinkReport links_;
  nlohmann::json places_;
  int lost_rank_ = -1;
};

// Whether any target rank shares a CPU with any drafter rank on the same host, from the ranks'
// places (Cluster::rank_places(): host and CPU affinity per rank). A rank whose CPUs are unknown
// counts as sharing. SSD's pre-speculation switch measures only then (job.cpp): on cores of its
// own the drafter's work cannot slow verification, and the switch's blocks only add noise.
bool targets_share_cores_with_drafters(const nlohmann::json& places, const RankLayout& layout);

}  // namespace ssd
