#include "actors/roles/cluster.h"
#include "actors/roles/stranded_rank.h"

#include <fmt/format.h>

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "actors/transport/handshake.h"
#include "actors/transport/mpi_check.h"
#include "actors/transport/mpi_collective.h"
#include "actors/transport/mpi_transport.h"
#include "actors/transport/mpi_world.h"
#include "actors/transport/emulated_link.h"
#include "actors/transport/tracing_transport.h"
#include "runtime/core/error.h"
#include "runtime/train/distill_dataset.h"

namespace ssd {
namespace {

// The digest of the model file (runtime/train/distill_dataset.h: size plus the first 64 KiB,
// its header and metadata), the one function a distill dataset also records: ranks that opened
// different files, or different versions of one, disagree here.
uint64_t model_digest(std::string_view path) {
  if (path.empty()) return 0;
  return std::stoull(model_file_digest(std::string(path)), nullptr, 16);
}

// This process's host, pid, CPU affinity and device, as a JSON text for the gather (the pid
// lets the leader see a drafter's process die when they share a host: drafter_loss.h).
std::string my_place(int rank, int device) {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  std::vector<int> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0)
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return nlohmann::json{{"rank", rank},
                        {"host", host},
                        {"pid", static_cast<int>(getpid())},
                        {"cpus", cpus},
                        {"device", device}}
      .dump();
}

}  // namespace

Cluster::Cluster(int tp, std::string_view config_text, std::string_view model_path,
                 double watchdog_s, const GpuLinkOptions& gpu, std::vector<StartupField> startup,
                 const FaultPlan& fault) {
  if (!MpiSession::launched_by_launcher()) {
    SSD_CHECK(tp == 1,
              "--tp {} needs {} target ranks: launch with mpirun -n {} (or launch/ssd-launch "
              "--target-ranks {})",
              tp, tp, tp, tp);
    layout_ = RankLayout::make(1, 0, 1);
    dog_ = std::make_unique<Watchdog>(0, Role::kTarget);
    faults_ = std::make_unique<FaultInjector>(fault, layout_);
    placement_ = place_on_gpus(nullptr, layout_, gpu);
    links_.transport = "none";
    places_ = nlohmann::json::array({nlohmann::json::parse(my_place(0, placement_.device))});
    return;
  }
  {
    // Before MPI_Init the rank and role come from the launcher's environment (a job whose
    // layout is impossible is refused after MPI_Init, by MpiWorld, with the whole story).
    const int rank = MpiSession::launcher_rank(), size = MpiSession::launcher_size();
    if (fault.active && fault.phase == FaultPhase::kInit && rank >= 0 && rank < size && tp <= size)
      FaultInjector(fault, RankLayout::make(size, rank, tp)).at(FaultPhase::kInit, 0,
                                                                "before MPI_Init");
  }
  // MPI_Init also waits out the other ranks' loading of the binary (up to 50 s was seen on a
  // loaded VM with a CUDA-linked build), which no step deadline should judge: at least 60 s.
  session_ = std::make_unique<MpiSession>(nullptr, nullptr, std::max(watchdog_s, kMinInitWaitS));
  // The watchdog starts before the first collective, with this rank's role as its own --tp says
  // (the layout is validated by MpiWorld below; the agreement makes every rank's --tp the same).
  int world_rank = 0;
  SSD_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &world_rank));
  dog_ = std::make_unique<Watchdog>(world_rank, world_rank < tp ? Role::kTarget : Role::kDrafter);
  const auto ms = std::chrono::milliseconds(static_cast<int64_t>(watchdog_s * 1000));
  {
    // The first collective: every rank's start-up flags, before any collective they shape.
    if (std::none_of(startup.begin(), startup.end(),
                     [](const StartupField& f) { return f.flag == "--tp"; }))
      startup.insert(startup.begin(), StartupField{"--tp", std::to_string(tp)});
    Watchdog::Scope scope(*dog_, "agreeing on the start-up flags with every rank", watchdog_s);
    agree_on_startup(MPI_COMM_WORLD, startup);
  }
  {
    Watchdog::Scope scope(*dog_,
                          "the start-up collectives (communicator splits, device placement, "
                          "transport set-up)",
                          watchdog_s);
    mpi_ = std::make_unique<MpiWorld>(tp);
    layout_ = mpi_->layout();
    faults_ = std::make_unique<FaultInjector>(fault, layout_);
    placement_ = place_on_gpus(&mpi_->world(), layout_, gpu);
    if (layout_.world == 1) {
      places_ = nlohmann::json::array({nlohmann::json::parse(my_place(0, placement_.device))});
      return;
    }
    // Every frame on the drafter link can go on the timeline (--trace-json): costs nothing when
    // off. --link-emulate delays target<->drafter frames below the tracing (which sees the
    // actors' view).
    std::unique_ptr<Transport> link = make_world_transport(mpi_->world(), placement_, gpu);
    if (gpu.link.active())
      link = std::make_unique<EmulatedLink>(std::move(link), layout_.tp, gpu.link);
    world_ = std::make_unique<TracingTransport>(std::move(link));
    if (layout_.is_target() && layout_.tp > 1)
      tp_ = make_tp_collective(mpi_->tp(), placement_, gpu);
  }
  faults_->set_world(world_.get());
  {
    Watchdog::Scope scope(*dog_, "the start-up handshake", watchdog_s);
    try {
      faults_->at(FaultPhase::kStartup, 0, "before the start-up handshake");
    } catch (const std::exception& e) {
      abort(e.what());  // one rank's error: the others are already waiting in the handshake
    }
    try {
      handshake(*world_, make_hello(layout_, digest64(config_text), model_digest(model_path)),
                ms);
    } catch (const TransportTimeout& e) {
      // Only this rank gave up (a peer is dead or hung): returning through MPI_Finalize would
      // wait for that peer, so the job ends here. A refusal is thrown on every rank alike.
      abort(e.what());
    } catch (const HandshakePeerFailed& e) {  // a peer's error or corrupted frame: ours alone
      abort(e.what());
    }
  }
  // Quick and time-bounded (a fraction of the deadline): a slow but live peer costs samples,
  // not the job. A peer silent for half the deadline is named (the frame waited for, and from
  // whom) and ends the job, as in the handshake: returning would wait for it in MPI_Finalize.
  Watchdog::Scope probe(*dog_, "the start-up link probe", watchdog_s);
  try {
    links_ = probe_links(*world_, tp_.get(), layout_, LinkProbeOptions::startup(watchdog_s));
  } catch (const Error& e) {
    abort(e.what());
  }
  places_ = nlohmann::json::array();
  for (const std::string& p : gather_text(my_place(layout_.rank, placement_.device)))
    places_.push_back(nlohmann::json::parse(p));
}

Cluster::~Cluster() {
  faults_.reset();
  dog_.reset();
  tp_.reset();
  world_.reset();
  mpi_.reset();
  session_.reset();
}

Collective* Cluster::tp_group() { return tp_.get(); }

std::vector<ClockOffset> Cluster::clock_offsets() {
  if (!mpi_ || layout_.world == 1) return {ClockOffset{}};
  return estimate_clock_offsets(mpi_->world());
}

std::vector<std::string> Cluster::gather_text(const std::string& text) {
  if (!mpi_ || layout_.world == 1) return {text};
  return ssd::gather_text(mpi_->world(), text);
}

void Cluster::end_past_lost_rank() {
  if (lost_rank_ < 0) return;
  std::fflush(stdout);
  const std::string line = fmt::format(
      "ssd: {}: the requests are done; ending the job with MPI_Abort(0), as MPI_Finalize may "
      "wait for the lost rank {}",
      layout_.describe(), lost_rank_);
  std::fprintf(stderr, "%s\n", line.c_str());
  // A lost rank still alive on this host (stopped, hung) would keep the job past the abort.
  if (end_stranded_rank(places_, lost_rank_))
    std::fprintf(stderr, "ssd: %s: ended the lost rank %d's process (SIGKILL) first\n",
                 layout_.describe().c_str(), lost_rank_);
  std::fflush(stderr);
  if (MpiSession::initialized()) MPI_Abort(MPI_COMM_WORLD, 0);
  std::_Exit(0);
}

void Cluster::abort(const std::string& what) {
  const std::string line = fmt::format("ssd: {}: error: {}", layout_.describe(), what);
  if (world_) {
    try {
      ErrorMsg e{layout_.rank, layout_.role(), what};
      if (layout_.rank != 0) world_->send(0, e);
    } catch (...) {
    }
  }
  abort_job(1, line);
}

bool targets_share_cores_with_drafters(const nlohmann::json& places, const RankLayout& layout) {
  const auto place = [&](int rank) -> const nlohmann::json* {
    for (const nlohmann::json& p : places)
      if (p.value("rank", -1) == rank) return &p;
    return nullptr;
  };
  for (int t = 0; t < layout.tp; ++t)
    for (int d : layout.drafter_ranks()) {
      const nlohmann::json* a = place(t);
      const nlohmann::json* b = place(d);
      if (!a || !b || !a->contains("cpus") || !b->contains("cpus")) return true;
      if (a->value("host", std::string()) != b->value("host", std::string())) continue;
      const std::vector<int> ca = a->at("cpus").get<std::vector<int>>();
      const std::vector<int> cb = b->at("cpus").get<std::vector<int>>();
      if (ca.empty() || cb.empty()) return true;
      for (int c : ca)
        if (std::find(cb.begin(), cb.end(), c) != cb.end()) return true;
    }
  return false;
}

}  // namespace ssd
