#include "launch/cli/serve_command.h"

#include <fmt/format.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <thread>

#include "actors/roles/job.h"
#include "actors/roles/model_session.h"
#include "actors/serve/http_server.h"
#include "actors/serve/local_engine.h"
#include "actors/serve/metrics.h"
#include "actors/serve/openai_service.h"
#include "actors/serve/remote_engine.h"
#include "actors/serve/scheduler.h"
#include "launch/cli/build_info.h"
#include "launch/cli/flags.h"
#include "launch/cli/job_flags.h"
#include "runtime/core/error.h"

namespace ssd {
namespace {

struct ServeArgs : JobFlags {
  ModeFlags run;
  std::string host = "127.0.0.1";
  int32_t port = 8080;
  int64_t max_batch = 8;
  int64_t max_queue = 64;
  int64_t max_body = 1 << 20;
  std::string api_key;
  std::optional<std::string> served_model_name;
  std::optional<std::filesystem::path> port_file;

  template <class V>
  void visit(V&& v) {
    visit_around(v, [&] {
      run.visit(v);
      v(host, "host", "address to listen on");
      v(port, "port", "TCP port; 0 = any free port (see --port-file)", {.min = 0, .max = 65535});
      v(max_batch, "max-batch", "requests decoded together (the running batch)",
        {.min = 1, .max = 4096});
      v(max_queue, "max-queue", "requests waiting beyond the batch; more get 503", {.min = 0});
      v(max_body, "max-body", "largest request body in bytes; larger gets 413", {.min = 1});
      v(api_key, "api-key", "if set, /v1/* needs 'Authorization: Bearer KEY' (401 otherwise)");
      v(served_model_name, "served-model-name",
        "model id in /v1/models (default: the file's stem)");
      v(port_file, "port-file", "write the bound port to this file once listening");
    });
  }
};

constexpr const char* kSummary =
    "Serve the model over HTTP with the OpenAI API (POST /v1/chat/completions, /v1/completions,\n"
    "streamed or not; GET /v1/models, /health, /metrics), batching requests continuously.\n"
    "SIGTERM or SIGINT to rank 0 drains: new requests get 503, those in flight finish.";

// SIGTERM / SIGINT: the handler writes the signal's number to a pipe, whichever thread it
// interrupts (MPI's own threads included); on rank 0 a watcher thread reads it and starts the
// drain. Every rank installs the handler, so a signal mpirun forwards to the other ranks does not
// end them before the leader says so (they exit when it shuts them down).
int g_signal_pipe[2] = {-1, -1};

extern "C" void on_serve_signal(int sig) {
  const char c = static_cast<char>(sig);
  [[maybe_unused]] const ssize_t n = ::write(g_signal_pipe[1], &c, 1);
}

void install_signal_handlers() {
  SSD_CHECK(::pipe(g_signal_pipe) == 0, "cannot create the signal pipe");
  ::fcntl(g_signal_pipe[1], F_SETFL, O_NONBLOCK);
  struct sigaction sa {};
  sa.sa_handler = on_serve_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  ::sigaction(SIGTERM, &sa, nullptr);
  ::sigaction(SIGINT, &sa, nullptr);
  ::signal(SIGPIPE, SIG_IGN);  // a client that leaves mid-write is a failed write, not a signal
}

int run_serve(const ServeArgs& args, Cluster& cluster);

}  // namespace

int run_serve_command(int argc, const char* const* argv) {
  ServeArgs args;
  if (parse_or_print_help(argc, argv, args, "ssd serve", kSummary)) return 0;
  args.dist.fault = fault_plan_from_env();
  install_signal_handlers();
  return run_on_cluster(args.dist, args.backend.backend, resolved_text(args),
                        args.target.model.string(),
                        [&](Cluster& cluster) { return run_serve(args, cluster); });
}

namespace {

int run_serve(const ServeArgs& args, Cluster& cluster) {
  const RankLayout& layout = cluster.layout();
  ModelSession session(
      session_options(cluster, args.target.model.string(), args.target.threads,
                      args.target.ctx_size, args.dist));
  JobSpec spec;
  spec.mode = args.run.mode;
  spec.drafter = args.run.drafter;
  const KChoice kc = args.drafter_flags.k_choice();
  spec.k = kc.k;
  spec.auto_k = kc.automatic;
  spec.drafter_options = args.drafter_flags.options(args.target.threads);
  spec.dist = args.dist;
  spec.max_batch = args.max_batch;
  check_job(spec, layout);
  if (!layout.is_target_leader()) return serve_rank(cluster, session, spec);

  fmt::print(stderr, "model: {} | {}\n", session.file().summary(), session.backend_summary());
  if (cluster.distributed()) fmt::print(stderr, "ranks: {}\n", layout.summary());
  LeaderJob job(cluster, session, spec);
  WarmupPlan plan;
  plan.max_batch = args.max_batch;
  if (args.run.mode != "ar")
    for (int32_t k = kc.automatic ? 1 : kc.k; k <= kc.k; ++k) plan.ks.push_back(k);
  job.warm_up(plan, GenerationRequest{}.prefill_chunk);

  const std::string name =
      args.served_model_name.value_or(std::filesystem::path(args.target.model).stem().string());
  const bool speculative = args.run.mode != "ar";
  ServeMetrics metrics(name, speculative ? kc.k : 0);
  // Lost while loading: the server decodes on the target alone from the start (SD with the
  // leader's own lookup, job.local_drafter(), or AR under --mode ar).
  if (const std::optional<DrafterLoss> loss = job.drafter_loss())
    metrics.set_drafter_lost(loss->rank);
  std::unique_ptr<DecodeEngine> engine;
  const RemoteEngine* remote = nullptr;  // the engine when the drafter runs on drafter ranks
  if (speculative && job.remote()) {
    RemoteEngineOptions ro;
    ro.feature_layers = job.remote_feature_layers();
    ro.k = kc.k;
    ro.auto_k = kc.automatic;
    ro.prespeculate = args.run.mode == "ssd";
    ro.prespec = job.prespec_switch_options();
    ro.step_s = args.dist.watchdog_s;
    ro.loss_policy = job.loss_policy();
    auto re = std::make_unique<RemoteEngine>(job.target(), *cluster.world(), layout,
                                             cluster.dog(), ro, metrics);
    re->set_leader_lookups(job.leader_lookups());  // --miss-at leader, and after a loss
    remote = re.get();
    engine = std::move(re);
  } else {
    engine = std::make_unique<LocalEngine>(
        job.target(), speculative ? job.local_drafter() : nullptr,
        SpecLengthOptions{.k_max = kc.k, .automatic = kc.automatic}, metrics);
  }
  Scheduler scheduler(*engine, job.target(), session.tokenizer(),
                      SchedulerOptions{args.max_batch, args.max_queue}, metrics);
  OpenAiService service(scheduler, session.tokenizer(), job.target(), metrics,
                        ServiceOptions{name, args.api_key});
  HttpOptions ho;
  ho.host = args.host;
  ho.port = static_cast<uint16_t>(args.port);
  ho.max_body = args.max_body;
  ho.max_connections = std::max<int64_t>(64, 2 * (args.max_batch + args.max_queue) + 16);
  HttpServer http(ho, [&](const HttpRequest& req, HttpResponder& res) { service.handle(req, res); });

  // The drain starts at SIGTERM / SIGINT; a 0 byte (written below) ends the watcher.
  std::thread signals([&scheduler] {
    char c = 0;
    while (::read(g_signal_pipe[0], &c, 1) == 1 && c != 0) {
      fmt::print(stderr, "ssd serve: {} received: draining (new requests get 503)\n",
                 c == SIGTERM ? "SIGTERM" : "SIGINT");
      scheduler.begin_drain();
    }
  });
  struct JoinSignals {
    std::thread& t;
    ~JoinSignals() {
      const char c = 0;
      [[maybe_unused]] const ssize_t n = ::write(g_signal_pipe[1], &c, 1);
      t.join();
    }
  } join_signals{signals};

  http.start();
  if (args.port_file) {
    std::ofstream(*args.port_file) << http.port() << "\n";
  }
  fmt::print(stderr, "ssd serve: listening on http://{}:{} (model '{}', mode {}{}, max batch {}, "
             "pid {}) | {}\n",
             args.host, http.port(), name, args.run.mode,
             speculative ? fmt::format(", k {}", kc.automatic ? fmt::format("auto<={}", kc.k)
                                                              : std::to_string(kc.k))
                         : std::string(),
             args.max_batch, ::getpid(), build_description());
  scheduler.run();
  http.stop();
  // A drafter rank lost while serving: the job leaves it out of the shutdown and ends past it.
  if (remote && remote->loss()) job.note_drafter_loss(*remote->loss());
  job.finish();
  fmt::print(stderr, "ssd serve: drained, exiting\n");
  return 0;
}

}  // namespace
}  // namespace ssd
