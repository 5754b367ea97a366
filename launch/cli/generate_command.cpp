#include "launch/cli/generate_command.h"

#include <fmt/format.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <mutex>
#include <optional>
#include <thread>

#include "actors/roles/backend_choice.h"
#include "actors/roles/drafter_factory.h"
#include "actors/roles/job.h"
#include "actors/roles/model_session.h"
#include "actors/transport/mpi_world.h"
#include "launch/cli/backend_flags.h"
#include "launch/cli/build_info.h"
#include "launch/cli/distributed_flags.h"
#include "launch/cli/drafter_flags.h"
#include "launch/cli/flags.h"
#include "launch/cli/run_report.h"
#include "runtime/core/error.h"
#include "runtime/generate/generation.h"
#include "runtime/tokenizer/chat_template.h"
#include "runtime/tokenizer/stream_decoder.h"

namespace ssd {
namespace {

int default_threads() {
  const unsigned hc = std::thread::hardware_concurrency();
  return hc == 0 ? 1 : static_cast<int>(std::min(hc, 64u));
}

struct GenerateArgs {
  std::filesystem::path model;
  std::string mode = "ar";
  std::string drafter = "ngram";
  std::string k = "auto";
  int32_t width = 1;
  DrafterFlags drafter_flags;
  std::string prompt;
  std::optional<std::filesystem::path> prompt_file;
  int64_t n_predict = 128;
  float temp = 0;
  int32_t top_k = 0;
  float top_p = 1;
  float min_p = 0;
  uint64_t seed = 0;
  bool chat = false;
  std::optional<std::string> system;
  int32_t threads = default_threads();
  int64_t ctx_size = 0;
  bool ignore_eos = false;
  bool quiet = false;
  std::optional<std::filesystem::path> stats_json;
  DistributedConfig dist;
  BackendFlags backend;

  template <class V>
  void visit(V&& v) {
    v(model, "model", "GGUF file, or safetensors checkpoint directory with config.json",
      {.required = true, .short_name = 'm', .must_exist = true});
    v(mode, "mode",
      "ar: the target alone; sd: draft with --drafter, verify with the target; ssd: the drafter "
      "on its own rank pre-speculates while the target verifies (needs mpirun)",
      {.choices = {"ar", "sd", "ssd"}});
    v(drafter, "drafter",
      "sd drafter: ngram[:MIN-MAX], model:PATH, early-exit:L, domino:PATH, oracle:ALPHA (research)");
    v(k, "k",
      "sd/ssd: draft tokens per round (1..32), or auto: per sequence and round the length in "
      "0..--k-max with the most expected tokens per second, from this run's measured costs and "
      "acceptance");
    v(width, "width", "sd: first-level draft branches verified as a tree (1 = a chain)",
      {.min = 1, .max = 16});
    drafter_flags.visit(v);
    v(prompt, "prompt", "prompt text (or use --prompt-file)", {.short_name = 'p'});
    v(prompt_file, "prompt-file", "read the prompt from this file", {.must_exist = true});
    v(n_predict, "n", "maximum number of tokens to generate", {.short_name = 'n', .min = 0});
    v(temp, "temp", "sampling temperature; 0 = greedy", {.min = 0, .max = 100});
    v(top_k, "top-k", "keep only the k likeliest tokens; 0 = off", {.min = 0});
    v(top_p, "top-p", "nucleus sampling mass; 1 = off", {.min = 1e-6, .max = 1});
    v(min_p, "min-p", "drop tokens below min-p x the top probability; 0 = off",
      {.min = 0, .max = 1});
    v(seed, "seed", "sampling seed: the same seed gives the same tokens, bit for bit");
    v(chat, "chat", "wrap the prompt in the model's chat template as a user message");
    v(system, "system", "system message for --chat (default: the template's own, if any)");
    v(threads, "threads", "CPU worker threads", {.short_name = 't', .min = 1, .max = 1024});
    v(ctx_size, "ctx-size", "KV cache positions; 0 = min(model context, 4096)", {.min = 0});
    v(ignore_eos, "ignore-eos", "keep generating past end-of-generation tokens (benchmarks)");
    v(quiet, "quiet", "do not stream the generated text to stdout", {.short_name = 'q'});
    v(stats_json, "stats-json", "write the run's figures and output as JSON to this path");
    visit_flags(dist, v);
    backend.visit(v);
  }
};

constexpr const char* kSummary =
    "Generate text from a prompt: --mode ar decodes with the target alone, --mode sd drafts with\n"
    "--drafter and verifies with the target (output identical to ar under greedy decoding, and\n"
    "distributed as ar under sampling).";

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  SSD_CHECK(in.good(), "--prompt-file: cannot read '{}'", p.string());
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::vector<int32_t> build_prompt(const GenerateArgs& a, const Tokenizer& tok) {
  SSD_CHECK(a.prompt.empty() != !a.prompt_file.has_value(),
            "give exactly one of --prompt and --prompt-file");
  const std::string text = a.prompt_file ? read_file(*a.prompt_file) : a.prompt;
  SSD_CHECK(!a.system || a.chat, "--system needs --chat");
  if (!a.chat) return tok.encode(text, /*add_bos=*/true, /*parse_special=*/true);
  const ChatTemplate tmpl = ChatTemplate::from_spec(tok.spec());
  std::vector<ChatMessage> msgs;
  if (a.system) msgs.push_back({"system", *a.system});
  msgs.push_back({"user", text});
  return tok.encode(tmpl.render(msgs, /*add_generation_prompt=*/true), true, true);
}

// What the leader produced before a failure, for the --stats-json written then ("status":
// "failed"). A watchdog's thread may write it while the leader streams tokens: behind a mutex.
struct PartialRun {
  std::mutex mutex;
  std::string text;
  std::vector<int32_t> tokens;
  std::string ranks;
  bool written = false;  // the stats file was written (success or failure): write it once
};

// Best effort: a failure report must not fail in turn.
void write_failure_json(const GenerateArgs& args, PartialRun& p, std::string_view cause) {
  if (!args.stats_json) return;
  std::lock_guard<std::mutex> lock(p.mutex);
  if (p.written) return;
  p.written = true;
  nlohmann::json j;
  j["status"] = "failed";
  j["cause"] = std::string(cause);
  j["model"] = args.model.string();
  j["ranks"] = p.ranks;
  j["output_token_ids"] = p.tokens;
  j["output_text"] = p.text;
  j["commit"] = build_commit();
  j["build"] = build_description();
  j["config"] = resolved_json(args);
  std::ofstream out(*args.stats_json);
  out << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
}

int run_generate(const GenerateArgs& args, Cluster& cluster, PartialRun& partial);

}  // namespace

int run_generate_command(int argc, const char* const* argv) {
  GenerateArgs args;
  if (parse(argc, argv, args).help) {
    fmt::print("{}", help_text(GenerateArgs{}, "ssd generate", kSummary));
    return 0;
  }
  args.dist.fault = fault_plan_from_env();
  SSD_CHECK(args.prompt.empty() != !args.prompt_file.has_value(),
            "give exactly one of --prompt and --prompt-file");

  // On failure the leader still writes --stats-json ("status": "failed", the cause, the tokens
  // streamed so far): from the error's unwinding, or from the abort hook when a watchdog ends
  // the job (other ranks never write the file).
  PartialRun partial;
  return run_on_cluster(
      args.dist, args.backend.backend, resolved_text(args), args.model.string(),
      [&](Cluster& cluster) {
        const bool leader = cluster.layout().is_target_leader();
        if (leader) {
          partial.ranks = cluster.layout().summary();
          set_abort_hook([&](std::string_view why) { write_failure_json(args, partial, why); });
        }
        try {
          const int code = run_generate(args, cluster, partial);
          set_abort_hook({});
          return code;
        } catch (const std::exception& e) {
          set_abort_hook({});
          if (leader) write_failure_json(args, partial, e.what());
          throw;
        }
      });
}

namespace {

int run_generate(const GenerateArgs& args, Cluster& cluster, PartialRun& partial) {
  const RankLayout& layout = cluster.layout();
  SessionOptions so =
      session_options(cluster, args.model.string(), args.threads, args.ctx_size, args.dist);
  ModelSession session(so);
  JobSpec spec;
  spec.mode = args.mode;
  spec.drafter = args.drafter;
  const KChoice kc = args.drafter_flags.k_choice(args.k);
  spec.k = kc.k;
  spec.auto_k = kc.automatic;
  spec.sampler = SamplerConfig{args.temp, args.top_k, args.top_p, args.min_p, args.seed};
  spec.drafter_options = args.drafter_flags.options(args.threads);
  spec.dist = args.dist;
  check_job(spec, layout);
  if (!layout.is_target_leader()) return serve_rank(cluster, session, spec);

  const Tokenizer& tok = session.tokenizer();
  fmt::print(stderr, "model: {} | {}\n", session.file().summary(), session.backend_summary());
  if (cluster.distributed())
    fmt::print(stderr, "ranks: {}\n{}\n", layout.summary(), cluster.links().summary());
  LeaderJob job(cluster, session, spec);

  GenerationRequest req;
  req.prompt = build_prompt(args, tok);
  req.max_new_tokens = args.n_predict;
  req.sampler = spec.sampler;
  if (!args.ignore_eos) req.stop_ids = tok.spec().eog_ids;
  check_context(job.target(), req, args.mode == "ar" ? 0 : kc.k);
  WarmupPlan plan;  // CUDA graphs of this run's forward sizes, before its first token
  if (args.mode != "ar") plan.ks = {kc.k};
  for (int32_t k = 1; kc.automatic && k < kc.k; ++k) plan.ks.push_back(k);
  plan.width = args.width;
  job.warm_up(plan, req.prefill_chunk);
  const SdOptions sd{.k = kc.k, .width = args.width, .auto_k = kc.automatic};
  SSD_CHECK(args.width == 1 || !job.remote() || args.mode == "ar",
            "--width {} (tree drafts) is not supported with drafter ranks yet; use --width 1",
            args.width);

  StreamDecoder stream(tok);
  std::string text;
  auto on_token = [&](int32_t id) {
    const std::string piece = stream.push(id);
    text += piece;
    {
      std::lock_guard<std::mutex> lock(partial.mutex);
      partial.tokens.push_back(id);
      partial.text += piece;
    }
    if (!args.quiet) {
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::fflush(stdout);
    }
    return true;
  };
  RunReport r = job.remote() && args.mode != "ar"
                    ? run_remote_request(*job.remote(), args.mode, args.drafter, req, kc.k, kc.automatic,
                                         on_token)
                    : run_request(job.target(), job.local_drafter(), req, sd, on_token);
  if (!r.drafter_loss) r.drafter_loss = job.drafter_loss();  // lost before its first round
  job.finish();
  const std::string rest = stream.flush();
  text += rest;
  if (!args.quiet) {
    fmt::print("{}\n", rest);
    std::fflush(stdout);  // the text ends before the summary that follows on stderr
  }

  fmt::print(stderr, "{}", r.sd_summary());
  fmt::print(stderr, "figures: {} | {} threads, {}\n", r.figures_line(), args.threads,
             build_description());

  if (args.stats_json) {
    std::lock_guard<std::mutex> lock(partial.mutex);
    partial.written = true;
    nlohmann::json j = r.to_json();
    j["status"] = "ok";
    j["model"] = args.model.string();
    j["model_summary"] = session.file().summary();
    j["backend"] = session.backend().name();
    j["transport"] = cluster.placement().transport;
    j["ranks"] = layout.summary();
    j["tp"] = layout.tp;
    j["drafter_ranks"] = layout.n_drafters();
    j["threads"] = args.threads;
    j["commit"] = build_commit();
    j["build"] = build_description();
    j["prompt_token_ids"] = req.prompt;
    j["output_text"] = text;
    j["config"] = resolved_json(args);
    j["links"] = cluster.links().to_json();
    j["rank_places"] = cluster.rank_places();
    std::ofstream out(*args.stats_json);
    SSD_CHECK(out.good(), "--stats-json: cannot write '{}'", args.stats_json->string());
    // Generated bytes need not be valid UTF-8 (a token can end mid-character); the JSON text
    // carries U+FFFD there, output_token_ids stay exact.
    out << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  }
  return 0;
}

}  // namespace
}  // namespace ssd
