#include "actors/roles/job.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "actors/roles/backend_choice.h"
#include "actors/roles/drafter_actor.h"
#include "actors/roles/trace_capture.h"
#include "actors/transport/frame.h"
#include "runtime/core/error.h"
#include "runtime/drafters/ngram_drafter.h"
#include "runtime/drafters/suffix_drafter.h"
#include "runtime/model/forward_warmup.h"

namespace ssd {

int run_on_cluster(const DistributedConfig& dist, const std::string& backend_flag,
                   std::string_view config_text, const std::string& model_path,
                   const std::function<int(Cluster&)>& body) {
  GpuLinkOptions gpu;
  gpu.cuda_backend = resolve_backend(backend_flag, &gpu.backend_note) == BackendKind::Cuda;
  gpu.transport = dist.transport;
  gpu.devices = dist.devices;
  gpu.share_devices = dist.share_devices;
  gpu.megatron = dist.tp_mode == "megatron";
  gpu.timeout_s = dist.watchdog_s;
  if (dist.link_emulate) gpu.link = parse_link_emulation(*dist.link_emulate);
  // The flags that shape the start-up collectives, compared before any of them runs (not
  // --backend: ranks may resolve it differently, and place_on_gpus() agrees on the job's).
  std::vector<StartupField> startup = {
      {"--tp", std::to_string(dist.tp)},
      {"--transport", dist.transport},
      {"--tp-mode", dist.tp_mode},
      {"--devices", dist.devices.value_or("")},
      {"--share-devices", dist.share_devices ? "on" : "off"},
      {"--link-emulate", dist.link_emulate.value_or("")},
      {"--trace-json", dist.trace_json ? "on" : "off"},
  };
  Cluster cluster(dist.tp, config_text, model_path, dist.watchdog_s, gpu, std::move(startup),
                  dist.fault);
  try {
    std::optional<TraceCapture> trace;
    if (dist.trace_json) trace.emplace(cluster, *dist.trace_json);
    const int rc = body(cluster);
    if (trace) trace->finish();
    cluster.end_past_lost_rank();  // only when the leader went on without a drafter
    return rc;
  } catch (const std::exception& e) {
    if (cluster.distributed()) cluster.abort(e.what());
    throw;
  }
}

SessionOptions session_options(Cluster& cluster, const std::string& model_path, int threads,
                               int64_t ctx_size, const DistributedConfig& dist) {
  SessionOptions so{model_path, threads, ctx_size};
  if (cluster.layout().is_target()) so.tp_group = cluster.tp_group();
  so.tp_mode = dist.tp_mode == "megatron" ? TpMode::Megatron : TpMode::Exact;
  const GpuPlacement& p = cluster.placement();
  so.backend.kind = p.cuda_backend ? BackendKind::Cuda : BackendKind::Cpu;
  so.backend.device = p.cuda_backend ? p.device : 0;
  so.backend.note = p.note;
  return so;
}

void check_job(const JobSpec& spec, const RankLayout& layout) {
  SSD_CHECK(spec.mode != "ssd" || layout.n_drafters() > 0,
            "--mode ssd needs a drafter rank: launch {} target rank(s) + at least 1 drafter rank "
            "(mpirun -n {}, or launch/ssd-launch --target-ranks {} --drafter-ranks 1); this job "
            "has {}",
            layout.tp, layout.tp + 1, layout.tp, layout.summary());
  const std::string kind = parse_drafter_spec(spec.drafter).kind;
  SSD_CHECK(spec.mode != "sd" || layout.n_drafters() > 0 || layout.tp == 1 || kind == "ngram" ||
                kind == "model",
            "--drafter {} shares the target's weights, which --tp {} splits over the target "
            "ranks: run it on a drafter rank (mpirun -n {})",
            spec.drafter, layout.tp, layout.tp + 1);
}

namespace {

// SSD's backup speculator (--backup): answers a miss at once, without a model.
std::unique_ptr<Drafter> make_backup(const JobSpec& spec) {
  if (spec.dist.backup == "suffix")
    return std::make_unique<SuffixDrafter>(suffix_options(spec.drafter_options));
  return std::make_unique<NgramDrafter>(NgramOptions{});
}

// A copy of the drafter rank's primary when it is a lookup drafter (n-gram, suffix), else null.
std::unique_ptr<Drafter> lookup_primary(const JobSpec& spec, ModelSession& session) {
  const DrafterSpec d = parse_drafter_spec(spec.drafter);
  if (d.kind != "ngram" && d.kind != "suffix") return nullptr;
  return make_drafter(d, session, spec.drafter_options);
}

// The lookup the leader drafts with alone (LeaderLookup::own_choice): the primary's copy, else
// the backup's.
std::unique_ptr<Drafter> own_lookup(const JobSpec& spec, ModelSession& session) {
  std::unique_ptr<Drafter> primary = lookup_primary(spec, session);
  return primary ? std::move(primary) : make_backup(spec);
}

}  // namespace

int serve_rank(Cluster& cluster, ModelSession& session, const JobSpec& spec) {
  const RankLayout& layout = cluster.layout();
  const double step_s = spec.dist.watchdog_s;
  if (layout.is_target()) {
    LocalTarget shard(session.model(), session.kv());
    run_tp_worker(shard, *cluster.tp_group(), cluster.dog(), step_s, &cluster.faults());
    return 0;
  }
  // A drafter rank. When the leader goes on without a lost drafter, a drafter whose own deadline
  // passes leaves alone (its process ends; under recovery mode the others live on and the leader
  // sees it gone) instead of ending the whole job.
  if (continue_on_drafter_loss(spec.dist.on_drafter_loss))
    cluster.dog().set_abort([](const std::string& message) {
      std::fprintf(stderr, "%s; this drafter rank leaves, the target leader goes on without it\n",
                   message.c_str());
      std::fflush(stderr);
      std::_Exit(Watchdog::kExitCode);
    });
  // With --mode ar the leader only says goodbye; the drafter still starts so that
  // every rank runs the same code path (and a bad --drafter fails everywhere alike).
  std::unique_ptr<Drafter> primary =
      make_drafter(parse_drafter_spec(spec.drafter), session, spec.drafter_options);
  std::unique_ptr<Drafter> backup = make_backup(spec);
  DrafterActorOptions opts;
  opts.step_s = step_s;
  opts.faults = &cluster.faults();
  opts.fit_window = spec.dist.prespec_fit == "window";
  SsdDrafterOptions core = to_ssd_options(spec.dist, spec.k, spec.sampler);
  core.prespec_chunk = resolve_prespec_chunk(core.prespec_chunk, session.backend().name());
  if (const ReplayStatus rs = replay_status(session.backend()); rs.replays) {
    int64_t per_seq = core.fan_out.budget;  // branches pre-speculated per sequence and round
    for (const auto* list : {&core.fan_out.after_hit, &core.fan_out.after_miss}) {
      int64_t sum = 0;
      for (int32_t f : *list) sum += f;
      per_seq = std::max(per_seq, sum);
    }
    WarmupPlan plan;
    plan.max_batch = spec.max_batch * std::max<int64_t>(1, per_seq);
    plan.ks = {spec.k};
    plan.max_rows = rs.max_rows;
    const WarmupResult r = warm_up_forwards(primary->warmup_sites(plan));
    fmt::print(stderr,
               "cuda graphs (drafter rank {}): {} forward shapes captured at start-up ({} "
               "forwards, {:.2f} s): {}\n",
               layout.rank, replay_status(session.backend()).captured, r.forwards, r.seconds,
               r.summary.empty() ? "none" : r.summary);
  }
  run_drafter_actor(*cluster.world(), layout, *primary, backup.get(), core, opts, cluster.dog());
  return 0;
}

LeaderJob::LeaderJob(Cluster& cluster, ModelSession& session, const JobSpec& spec)
    : session_(session),
      spec_(spec),
      cluster_(cluster),
      local_(session.model(), session.kv(), &session.picker()) {
  const RankLayout& layout = cluster.layout();
  check_job(spec, layout);
  if (layout.tp > 1) tp_ = std::make_unique<TpLeaderTarget>(local_, *cluster.tp_group());
  if (layout.n_drafters() > 0) {
    loss_policy_.continue_on_loss = continue_on_drafter_loss(spec.dist.on_drafter_loss);
    loss_policy_.probe = [live = RankLiveness(cluster.rank_places())](int rank) {
      return live.state(rank);
    };
    loss_policy_.ranks = layout.drafter_ranks();  // a lost secondary stalls the lead's answers
    if (loss_policy_.continue_on_loss && !launcher_recovery_on())
      fmt::print(stderr,
                 "ssd: --on-drafter-loss continue without mpirun's recovery mode: a drafter "
                 "that hangs is survived, one that dies still ends the job (mpirun "
                 "--enable-recovery, or launch/ssd-launch --recovery)\n");
    // The drafter lead says what it conditions on once it has loaded its drafter.
    Transport& world = *cluster.world();
    const std::string what = "waiting for the drafter to load";
    Watchdog::Scope scope(cluster.dog(), what,
                          loss_policy_.continue_on_loss ? 2 * spec.dist.watchdog_s + 5
                                                        : spec.dist.watchdog_s);
    Envelope env;
    try {
      env = wait_for_drafter(world, layout.drafter_lead(), spec.dist.watchdog_s, loss_policy_,
                             what);
    } catch (const DrafterLost& e) {
      // No rounds yet: the leader runs SD alone with its own lookup, built now.
      std::string fallback = kPlainDecoding;
      if (spec.mode != "ar") {
        drafter_ = own_lookup(spec, session);
        fallback = lookup_fallback(lookup_kind(*drafter_));
      }
      load_loss_ = DrafterLoss{e.rank, -1, e.died, e.cause, fallback};
      report_loss(*load_loss_);
      return;
    }
    if (env.kind == MsgKind::kError) {
      const auto e = decode<ErrorMsg>(env);
      fail(fmt::format("rank {} ({}) failed: {}", e.rank, role_name(e.role), e.what));
    }
    const DrafterReady ready = decode<DrafterReady>(env);
    remote_features_ = ready.feature_layers;
    prespec_.adaptive = spec.dist.prespec_switch == "auto" &&
                        targets_share_cores_with_drafters(cluster.rank_places(), layout);
    remote_ = std::make_unique<RemoteDecoder>(target(), world, layout, ready.feature_layers,
                                              spec.k, cluster.dog(), spec.dist.watchdog_s,
                                              spec.auto_k, std::vector<int32_t>{}, prespec_);
    remote_->set_leader_lookups(leader_lookups());
    remote_->set_loss_policy(loss_policy_);
    remote_->set_faults(&cluster.faults());
    heartbeat_ = std::make_unique<HeartbeatSender>(world, layout.drafter_lead(),
                                                   spec.dist.watchdog_s / 4);
  } else if (spec.mode == "sd") {
    drafter_ = make_drafter(parse_drafter_spec(spec.drafter), session, spec.drafter_options);
  }
}

// The one place that decides the leader's lookup copies (leader_lookup.h): a copy of the drafter
// rank's primary when that is a lookup (built as the drafter rank builds it), and of its backup
// speculator (always one: --backup ngram or suffix). Held from the start under --miss-at leader;
// otherwise built at a lost drafter rank (DrafterLeadLink::lose). The recipe holds the job's spec
// and session, which outlive every engine of the job.
LeaderLookups LeaderJob::leader_lookups() const {
  auto make = [spec = spec_, &session = session_] {
    return std::make_unique<LeaderLookup>(lookup_primary(spec, session), make_backup(spec));
  };
  return {spec_.dist.miss_at == "leader" ? make() : nullptr, make};
}

void LeaderJob::warm_up(WarmupPlan plan, int64_t prefill_chunk,
                        std::span<Drafter* const> drafters) {
  const ReplayStatus before = replay_status(session_.backend());
  if (!before.replays) return;
  std::vector<Drafter*> all(drafters.begin(), drafters.end());
  if (drafter_) all.push_back(drafter_.get());
  // Verification keeps the target features its drafter feeds on: the remote drafter's, or those
  // of the local drafters (the first one's layers; a bench whose drafters read different layers
  // captures the others at their second use). Plain verification too unless every drafter reads
  // features.
  if (remote_) {
    plan.feature_layers = remote_features_;
    plan.plain_verify = remote_features_.empty();
  } else {
    plan.plain_verify = all.empty();
    for (Drafter* d : all) {
      const std::vector<int32_t> f = d->target_feature_layers();
      if (f.empty()) plan.plain_verify = true;
      else if (plan.feature_layers.empty()) plan.feature_layers = f;
    }
  }
  plan.max_rows = before.max_rows;
  std::vector<WarmupSite> sites;
  WarmupSite target{"target", &session_.model(), &session_.kv(), prefill_chunk,
                    target_warmup_sizes(plan)};
  target.hidden_sizes = target_feature_sizes(plan);
  target.hidden_layers = plan.feature_layers;
  target.via = tp_.get();  // under TP, every rank of the group runs the target's warm-up
  sites.push_back(std::move(target));
  for (Drafter* d : all)
    for (WarmupSite& s : d->warmup_sites(plan)) sites.push_back(std::move(s));
  const WarmupResult r = warm_up_forwards(sites);
  const ReplayStatus after = replay_status(session_.backend());
  fmt::print(stderr,
             "cuda graphs: {} forward shapes captured at start-up ({} forwards, {:.2f} s): {}\n",
             after.captured, r.forwards, r.seconds, r.summary.empty() ? "none" : r.summary);
}

void LeaderJob::note_drafter_loss(const DrafterLoss& loss) {
  if (remote_) remote_->note_loss(loss);
}

std::optional<DrafterLoss> LeaderJob::drafter_loss() const {
  if (load_loss_) return load_loss_;
  return remote_ ? remote_->loss() : std::nullopt;
}

void LeaderJob::finish() {
  if (finished_) return;
  finished_ = true;
  if (heartbeat_) heartbeat_->stop();  // none after the drafters' shutdown
  if (remote_) {
    remote_->shutdown_drafters();
  } else if (load_loss_) {
    for (int r : cluster_.layout().drafter_ranks())
      if (r != load_loss_->rank) cluster_.world()->send(r, DrafterShutdown{});
  }
  if (tp_) tp_->shutdown();
  // The job must not end in MPI_Finalize, which may wait for the lost drafter forever
  // (docs/faults.md, "Recovery").
  if (const std::optional<DrafterLoss> loss = drafter_loss()) cluster_.mark_lost(loss->rank);
}

LeaderJob::~LeaderJob() {
  // Unwinding from an error: shutting the drafters and the TP group down runs blocking
  // collectives that may never complete (a worker stuck in the failed forward's all-reduce); the
  // error is reported and the job ended by run_on_cluster, which ends these ranks too.
  if (std::uncaught_exceptions() > uncaught_at_start_) return;
  try {
    finish();
  } catch (...) {
  }
}

}  // namespace ssd
