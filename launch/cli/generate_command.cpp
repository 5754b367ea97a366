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
#include "launch/cli/build_info.h"
#include "launch/cli/decode_flags.h"
#include "launch/cli/flags.h"
#include "launch/cli/job_flags.h"
#include "launch/cli/run_report.h"
#include "runtime/core/error.h"
#include "runtime/generate/generation.h"
#include "runtime/tokenizer/chat_template.h"
#include "runtime/tokenizer/stream_decoder.h"

namespace ssd {
namespace {

struct GenerateArgs : JobFlags {
  ModeFlags run;
  std::string prompt;
  std::optional<std::filesystem::path> prompt_file;
  DecodeFlags decode;
  std::optional<std::string> system;
  bool quiet = false;
  std::optional<std::filesystem::path> stats_json;

  template <class V>
  void visit(V&& v) {
    visit_around(v, [&] {
      run.visit(v);
      v(prompt, "prompt", "prompt text (or use --prompt-file)", {.short_name = 'p'});
      v(prompt_file, "prompt-file", "read the prompt from this file", {.must_exist = true});
      decode.visit(v);
      v(system, "system", "system message for --chat (default: the template's own, if any)");
      v(quiet, "quiet", "do not stream the generated text to stdout", {.short_name = 'q'});
      v(stats_json, "stats-json", "write the run's figures and output as JSON to this path");
    });
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
  SSD_CHECK(!a.system || a.decode.chat, "--system needs --chat");
  if (!a.decode.chat) return tok.encode(text, /*add_bos=*/true, /*parse_special=*/true);
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
  j["model"] = args.target.model.string();
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
  if (parse_or_print_help(argc, argv, args, "ssd generate", kSummary)) return 0;
  args.dist.fault = fault_plan_from_env();
  SSD_CHECK(args.prompt.empty() != !args.prompt_file.has_value(),
            "give exactly one of --prompt and --prompt-file");

  // On failure the leader still writes --stats-json ("status": "failed", the cause, the tokens
  // streamed so far): from the error's unwinding, or from the abort hook when a watchdog ends
  // the job (other ranks never write the file).
  PartialRun partial;
  return run_on_cluster(
      args.dist, args.backend.backend, resolved_text(args), args.target.model.string(),
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
  SessionOptions so = session_options(cluster, args.target.model.string(), args.target.threads,
                                      args.target.ctx_size, args.dist);
  ModelSession session(so);
  JobSpec spec;
  spec.mode = args.run.mode;
  spec.drafter = args.run.drafter;
  const KChoice kc = args.drafter_flags.k_choice();
  spec.k = kc.k;
  spec.auto_k = kc.automatic;
  spec.sampler = args.decode.sampler();
  spec.drafter_options = args.drafter_flags.options(args.target.threads);
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
  req.max_new_tokens = args.decode.n_predict;
  req.sampler = spec.sampler;
  if (!args.decode.ignore_eos) req.stop_ids = tok.spec().eog_ids;
  check_context(job.target(), req, args.run.mode == "ar" ? 0 : kc.k);
  WarmupPlan plan;  // CUDA graphs of this run's forward sizes, before its first token
  if (args.run.mode != "ar") plan.ks = {kc.k};
  for (int32_t k = 1; kc.automatic && k < kc.k; ++k) plan.ks.push_back(k);
  plan.width = args.decode.width;
  job.warm_up(plan, req.prefill_chunk);
  const SdOptions sd{.k = kc.k, .width = args.decode.width, .auto_k = kc.automatic};
  SSD_CHECK(args.decode.width == 1 || !job.remote() || args.run.mode == "ar",
            "--width {} (tree drafts) is not supported with drafter ranks yet; use --width 1",
            args.decode.width);

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
  RunReport r = job.remote() && args.run.mode != "ar"
                    ? run_remote_request(*job.remote(), args.run.mode, args.run.drafter, req, kc.k, kc.automatic,
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
  fmt::print(stderr, "figures: {} | {} threads, {}\n", r.figures_line(), args.target.threads,
             build_description());

  if (args.stats_json) {
    std::lock_guard<std::mutex> lock(partial.mutex);
    partial.written = true;
    nlohmann::json j = r.to_json();
    j["status"] = "ok";
    j["model"] = args.target.model.string();
    j["model_summary"] = session.file().summary();
    j["backend"] = session.backend().name();
    j["transport"] = cluster.placement().transport;
    j["ranks"] = layout.summary();
    j["tp"] = layout.tp;
    j["drafter_ranks"] = layout.n_drafters();
    j["threads"] = args.target.threads;
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
