// What each rank does in a run, decided once from the Cluster's layout and the command's flags:
//
//   rank 0           the target leader: owns the requests (the command's own code runs here), its
//                    target is its TP shard behind TpLeaderTarget (or the whole model at T = 1);
//                    with drafter ranks and --mode sd|ssd, a RemoteDecoder talks to them.
//   ranks 1..T-1     TP workers: replay the leader's target calls on their shard (serve_rank).
//   ranks T..N-1     drafter actors: the drafter and the n-gram backup speculator, driven by the
//                    SSD core (serve_rank).
//
// --mode sd on a single process (or with no drafter rank) drafts on rank 0 between
// verifications, as before; with a drafter rank it drafts there, synchronously (the SSD baseline
// with the same placement); --mode ssd needs a drafter rank.
#pragma once

#include <exception>
#include <functional>
#include <span>
#include <memory>
#include <string>

#include "actors/roles/cluster.h"
#include "actors/roles/distributed_config.h"
#include "actors/roles/drafter_loss.h"
#include "actors/roles/drafter_factory.h"
#include "actors/roles/heartbeat.h"
#include "actors/roles/model_session.h"
#include "actors/roles/remote_decode.h"
#include "actors/roles/tp_target.h"

namespace ssd {

struct JobSpec {
  std::string mode = "ar";  // ar | sd | ssd
  std::string drafter = "ngram";
  int32_t k = 4;        // the speculation length; with auto_k the top of its range
  bool auto_k = false;  // --k auto: the leader chooses each round's length (spec_length.h)
  SamplerConfig sampler;
  DrafterOptions drafter_options;
  DistributedConfig dist;
  int64_t max_batch = 1;  // requests decoded together (bench --batch): drafter-rank warm-up sizes
};

// Resolves `backend_flag` (--backend auto|cpu|cuda) on this rank, joins the job (Cluster: the
// ranks agree on the backend and each gets its device) and runs a command's body on this rank.
// `--backend cuda` on a rank without a device fails there with one line before MPI starts (the
// launcher ends the others). An error on any rank of a distributed job ends the whole job with
// the message (no rank is left waiting for it).
int run_on_cluster(const DistributedConfig& dist, const std::string& backend_flag,
                   std::string_view config_text, const std::string& model_path,
                   const std::function<int(Cluster&)>& body);

// What this rank loads: the whole model, or its shard on a target rank of a TP group, on the
// backend and device the Cluster agreed on.
SessionOptions session_options(Cluster& cluster, const std::string& model_path, int threads,
                               int64_t ctx_size, const DistributedConfig& dist);

// Throws ssd::Error for a mode the layout cannot run (e.g. ssd without a drafter rank).
void check_job(const JobSpec& spec, const RankLayout& layout);

// Ranks other than 0: serve until the leader ends the job. Returns the process exit code. A
// drafter rank on a backend that replays forwards (CUDA graphs) first captures its drafter
// model's tree decode at every call size up to spec.max_batch x the fan-out budget (SSD's
// pre-speculation drafts that many branches per round, split over the drafter ranks; its
// fallback drafts up to the batch) and prints one stderr line saying what it captured.
int serve_rank(Cluster& cluster, ModelSession& session, const JobSpec& spec);

// Rank 0's side of the job.
class LeaderJob {
 public:
  LeaderJob(Cluster& cluster, ModelSession& session, const JobSpec& spec);
  ~LeaderJob();  // ends the workers' and drafters' loops
  LeaderJob(const LeaderJob&) = delete;
  LeaderJob& operator=(const LeaderJob&) = delete;

  TargetModel& target() { return tp_ ? static_cast<TargetModel&>(*tp_) : local_; }
  // sd without drafter ranks; or after a drafter rank lost while loading, the leader's own lookup
  // (leader_lookups()' choice: the primary's copy when it is n-gram or suffix, else the backup's).
  Drafter* local_drafter() { return drafter_.get(); }
  // sd / ssd with drafter ranks; null too when the drafter was lost before it was ready (the
  // job then runs SD on the leader with local_drafter(): drafter_loss() says so).
  RemoteDecoder* remote() { return remote_.get(); }
  // A drafter rank lost under --on-drafter-loss continue (while loading or in a round).
  std::optional<DrafterLoss> drafter_loss() const;
  // A loss found outside remote() (the server's engine): finish() then leaves the lost rank out
  // and the job ends past it (Cluster::end_past_lost_rank).
  void note_drafter_loss(const DrafterLoss& loss);
  // The policy for a lost drafter rank (--on-drafter-loss and the liveness probe), for an engine
  // of this job's own that waits for the drafter lead (the server's).
  const DrafterLossPolicy& loss_policy() const { return loss_policy_; }
  // The leader's copies of the drafter rank's lookup drafters for an engine of this job's own
  // (the server's), as remote() gets them: built now under --miss-at leader (to draft misses on
  // the leader), and a recipe that builds them at a lost drafter rank when there are none.
  LeaderLookups leader_lookups() const;
  // The pre-speculation switch's options (--prespec-switch, and whether target and drafter
  // ranks share cores), as remote() runs it.
  const PrespecSwitchOptions& prespec_switch_options() const { return prespec_; }
  // The target layers the remote drafter conditions on (its kDrafterReady).
  const std::vector<int32_t>& remote_feature_layers() const { return remote_features_; }
  void finish();  // the same as the destructor, but errors surface
  // On a backend that replays forwards (CUDA graphs): captures, before the first request, the
  // forwards the run repeats (runtime/model/forward_warmup.h): the target's decode step at
  // 1..plan.max_batch rows and its verification forward at each of plan.ks for every batch,
  // and the tree decode of this job's local drafter and of `drafters` (the command's own);
  // prints one stderr line saying what was captured. The job fills in the feature layers and
  // max_rows. Nothing on the CPU, or under tensor parallelism (its forwards exchange on the
  // host and stay eager).
  void warm_up(WarmupPlan plan, int64_t prefill_chunk, std::span<Drafter* const> drafters = {});

 private:
  ModelSession& session_;
  JobSpec spec_;
  std::vector<int32_t> remote_features_;  // target layers the remote drafter reads (verification keeps them)
  Cluster& cluster_;
  LocalTarget local_;
  std::unique_ptr<TpLeaderTarget> tp_;
  std::unique_ptr<Drafter> drafter_;
  std::unique_ptr<RemoteDecoder> remote_;
  DrafterLossPolicy loss_policy_;
  PrespecSwitchOptions prespec_;
  std::optional<DrafterLoss> load_loss_;  // lost before it said it was ready
  std::unique_ptr<HeartbeatSender> heartbeat_;  // to the drafter lead while the job lives
  bool finished_ = false;
  int uncaught_at_start_ = std::uncaught_exceptions();  // the destructor knows it is unwinding
};

}  // namespace ssd
