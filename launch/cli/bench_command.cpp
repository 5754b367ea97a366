#include "launch/cli/bench_command.h"

#include <fmt/format.h>

#include <fstream>
#include <sstream>
#include <thread>

#include "actors/roles/backend_choice.h"
#include "actors/roles/drafter_factory.h"
#include "actors/roles/job.h"
#include "actors/roles/model_session.h"
#include "launch/cli/backend_flags.h"
#include "launch/cli/build_info.h"
#include "launch/cli/distributed_flags.h"
#include "launch/cli/drafter_flags.h"
#include "launch/cli/flags.h"
#include "launch/cli/run_report.h"
#include "runtime/core/error.h"
#include "runtime/generate/generation.h"
#include "runtime/tokenizer/chat_template.h"
#include "runtime/train/prompt_set.h"

namespace ssd {
namespace {

struct BenchArgs {
  std::filesystem::path model;
  std::filesystem::path prompt_file;
  std::string drafters = "ngram";
  std::string k = "4";
  int32_t width = 1;
  int64_t n_predict = 64;
  int32_t max_prompts = 0;
  bool chat = true;
  float temp = 0;
  uint64_t seed = 0;
  int32_t threads = static_cast<int32_t>(std::max(1u, std::thread::hardware_concurrency()));
  DrafterFlags drafter_flags;
  std::optional<std::filesystem::path> out_json;
  std::optional<std::filesystem::path> outcome_trace;
  std::optional<std::filesystem::path> out_md;
  std::string modes = "ar,sd";
  int32_t batch = 1;
  DistributedConfig dist;
  BackendFlags backend;

  template <class V>
  void visit(V&& v) {
    v(model, "model", "target: GGUF file or safetensors checkpoint directory",
      {.required = true, .short_name = 'm', .must_exist = true});
    v(prompt_file, "prompt-file", "prompts, one per line ('#' comments, \\n escapes)",
      {.required = true, .must_exist = true});
    v(drafters, "drafters", "comma-separated --drafter specs to compare against AR");
    v(k, "k", "comma-separated draft lengths");
    v(width, "width", "first-level draft branches (1 = chain)", {.min = 1, .max = 16});
    v(n_predict, "n", "tokens to generate per prompt", {.short_name = 'n', .min = 1});
    v(max_prompts, "max-prompts", "use only the first N prompts; 0 = all", {.min = 0});
    v(chat, "chat", "wrap each prompt in the model's chat template");
    v(temp, "temp", "sampling temperature; 0 = greedy (and checks SD == AR)", {.min = 0});
    v(seed, "seed", "sampling seed");
    v(threads, "threads", "CPU worker threads", {.short_name = 't', .min = 1, .max = 1024});
    drafter_flags.visit(v);
    v(out_json, "out-json", "write all runs and the summary as JSON here");
    v(outcome_trace, "outcome-trace", "with drafter ranks: write each sd/ssd batch's round "
                                      "outcomes (JSONL, topology/sim/outcome_trace.h) into this "
                                      "directory as <mode>_p<first prompt>.jsonl, for `ssd "
                                      "simulate --outcome-trace`");
    v(out_md, "out-md", "write the summary table as markdown here");
    v(modes, "modes",
      "comma-separated modes to run: ar, sd, ssd (sd and ssd on the drafter rank when there is "
      "one; ssd needs one)");
    v(batch, "batch", "requests decoded together (prompts are taken in groups of this size)",
      {.min = 1, .max = 256});
    visit_flags(dist, v);
    backend.visit(v);
  }
};

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, sep);)
    if (!item.empty()) out.push_back(item);
  return out;
}

// Aggregate over the prompts of one configuration.
struct Row {
  std::string mode, drafter;
  int32_t k = 0;
  int64_t tokens = 0, after_first = 0, rounds = 0, accepted = 0;
  double decode_s = 0, draft_s = 0, verify_s = 0;
  int exact = 0, compared = 0;
  bool split = false;
  SplitFigures fig;
  double tps() const { return decode_s > 0 ? after_first / decode_s : 0; }
  double mal() const { return mode == "ar" ? 1.0 : rounds ? 1.0 + double(accepted) / rounds : 0; }
};

int run_bench(const BenchArgs& args, Cluster& cluster);

}  // namespace

int run_bench_command(int argc, const char* const* argv) {
  BenchArgs args;
  if (parse(argc, argv, args).help) {
    fmt::print("{}", help_text(BenchArgs{}, "ssd bench",
                               "Compare AR with SD (and, under mpirun with a drafter rank, SSD) "
                               "for several drafters and draft lengths."));
    return 0;
  }
  return run_on_cluster(args.dist, args.backend.backend, resolved_text(args), args.model.string(),
                        [&](Cluster& cluster) { return run_bench(args, cluster); });
}

namespace {

int run_bench(const BenchArgs& args, Cluster& cluster) {
  const RankLayout& layout = cluster.layout();
  const auto prompts = read_prompt_file(args.prompt_file.string(), args.max_prompts);
  std::vector<int32_t> ks;
  for (const auto& s : split(args.k, ',')) {
    int32_t v = 0;
    try {
      v = std::stoi(s);
    } catch (...) {
      fail(fmt::format("--k: '{}' is not an integer", s));
    }
    SSD_CHECK(v >= 1 && v <= 32, "--k {} must be between 1 and 32", v);
    ks.push_back(v);
  }
  std::vector<DrafterSpec> specs;
  for (const auto& s : split(args.drafters, ',')) specs.push_back(parse_drafter_spec(s));

  const std::vector<std::string> modes = split(args.modes, ',');
  for (const auto& m : modes)
    SSD_CHECK(m == "ar" || m == "sd" || m == "ssd", "--modes: '{}' is not ar, sd or ssd", m);
  auto has_mode = [&](const char* m) {
    return std::find(modes.begin(), modes.end(), m) != modes.end();
  };
  const bool remote_drafter = layout.n_drafters() > 0;
  SSD_CHECK(!remote_drafter || (specs.size() == 1 && ks.size() == 1),
            "with drafter ranks, give one --drafters spec and one --k (the drafter ranks load one "
            "drafter): got {} and {}",
            specs.size(), ks.size());

  SessionOptions so = session_options(cluster, args.model.string(), args.threads, 0, args.dist);
  ModelSession session(so);
  JobSpec spec;
  spec.mode = has_mode("ssd") ? "ssd" : "ar";
  spec.drafter = split(args.drafters, ',').front();
  spec.k = ks.front();
  spec.sampler = SamplerConfig{args.temp, 0, 1.0f, 0.0f, args.seed};
  spec.drafter_options = args.drafter_flags.options(args.threads);
  spec.dist = args.dist;
  spec.max_batch = args.batch;
  check_job(spec, layout);
  if (!layout.is_target_leader()) return serve_rank(cluster, session, spec);
  LeaderJob job(cluster, session, spec);
  TargetModel& target = job.target();

  const Tokenizer& tok = session.tokenizer();
  fmt::print(stderr, "model: {} | {}\n{}\n", session.file().summary(), session.backend_summary(),
             build_description());
  if (cluster.distributed()) fmt::print(stderr, "ranks: {}\n", layout.summary());
  // Build every local drafter before running anything: a bad spec fails before minutes of work.
  std::vector<std::unique_ptr<Drafter>> drafters;
  if (!remote_drafter && has_mode("sd"))
    for (const auto& sp : specs) drafters.push_back(make_drafter(sp, session, spec.drafter_options));
  {  // CUDA graphs of the run's forward sizes, before the first measured request
    WarmupPlan plan;
    plan.max_batch = args.batch;
    if (has_mode("sd") || has_mode("ssd")) plan.ks = ks;
    plan.width = args.width;
    std::vector<Drafter*> local;
    for (const auto& d : drafters) local.push_back(d.get());
    job.warm_up(plan, GenerationRequest{}.prefill_chunk, local);
  }

  const std::vector<int32_t>& stop_ids = tok.spec().eog_ids;
  const std::optional<ChatTemplate> tmpl =
      args.chat ? std::optional<ChatTemplate>(ChatTemplate::from_spec(tok.spec())) : std::nullopt;

  std::vector<Row> rows;
  nlohmann::json runs = nlohmann::json::array();
  auto row_for = [&](const std::string& mode, const std::string& d, int32_t k) -> Row& {
    for (auto& r : rows)
      if (r.mode == mode && r.drafter == d && r.k == k) return r;
    rows.push_back(Row{mode, d, k});
    return rows.back();
  };
  bool all_exact = true;
  const size_t B = static_cast<size_t>(args.batch);
  for (size_t first = 0; first < prompts.size(); first += B) {
    std::vector<GenerationRequest> reqs;
    for (size_t pi = first; pi < std::min(prompts.size(), first + B); ++pi) {
      GenerationRequest req;
      if (tmpl) {
        const ChatMessage m{"user", prompts[pi]};
        req.prompt = tok.encode(tmpl->render({&m, 1}, true), true, true);
      } else {
        req.prompt = tok.encode(prompts[pi], true, true);
      }
      req.max_new_tokens = args.n_predict;
      req.sampler = spec.sampler;
      req.stream = pi;
      req.stop_ids = stop_ids;
      reqs.push_back(std::move(req));
    }
    std::vector<std::vector<int32_t>> ar_ids(reqs.size());
    // One configuration over the batch: per request figures, the decode time of the batch
    // (wall time minus the prompts' prefill) shared by its requests' tokens.
    auto account = [&](const std::string& mode, const std::string& drafter, int32_t k,
                       const std::vector<GenerationResult>& gen, const std::vector<SdStats>* sd,
                       double wall_s, const SplitFigures* fig) {
      Row& row = row_for(mode, drafter, k);
      double prefill = 0;
      for (const auto& g : gen) prefill += g.prefill_s;
      row.decode_s += std::max(0.0, wall_s - prefill);
      for (size_t r = 0; r < gen.size(); ++r) {
        RunReport rep;
        rep.mode = mode;
        rep.drafter = drafter;
        rep.k = k;
        rep.gen = gen[r];
        if (sd) rep.sd = (*sd)[r];
        row.tokens += static_cast<int64_t>(gen[r].tokens.size());
        row.after_first += std::max<int64_t>(0, static_cast<int64_t>(gen[r].tokens.size()) - 1);
        row.rounds += rep.sd.rounds;
        row.accepted += rep.sd.accepted;
        row.draft_s += rep.sd.draft_s;
        row.verify_s += rep.sd.verify_s;
        if (mode == "ar") ar_ids[r] = gen[r].tokens;
        if (mode != "ar" && is_greedy(spec.sampler) && has_mode("ar")) {
          row.compared++;
          if (gen[r].tokens == ar_ids[r]) {
            row.exact++;
          } else {
            all_exact = false;
            fmt::print(stderr, "MISMATCH: prompt {} with {} {} k={} differs from AR\n",
                       first + r, mode, drafter, k);
          }
        }
        nlohmann::json j = rep.to_json();
        j["prompt_index"] = first + r;
        j["batch"] = reqs.size();
        runs.push_back(j);
      }
      if (fig) {
        row.split = true;
        row.fig.add(*fig);
      }
    };
    if (has_mode("ar")) {
      const double t0 = monotonic_seconds();
      std::vector<GenerationResult> gen = generate_ar_batch(target, reqs);
      account("ar", "", 0, gen, nullptr, monotonic_seconds() - t0, nullptr);
    }
    if (has_mode("sd") && !remote_drafter)
      for (size_t d = 0; d < drafters.size(); ++d)
        for (int32_t k : ks) {
          const double t0 = monotonic_seconds();
          SdBatchResult res = generate_sd_batch(target, *drafters[d], reqs, SdOptions{k, args.width});
          const double wall = monotonic_seconds() - t0;
          std::vector<GenerationResult> gen;
          std::vector<SdStats> sd;
          for (auto& r : res.requests) {
            gen.push_back(r.gen);
            sd.push_back(r.stats);
          }
          account("sd", drafters[d]->name(), k, gen, &sd, wall, nullptr);
        }
    for (const char* mode : {"sd", "ssd"}) {
      if (!remote_drafter || !has_mode(mode)) continue;
      const DrafterStatsMsg before = job.remote()->drafter_stats();
      const double t0 = monotonic_seconds();
      RemoteDecodeResult res = job.remote()->run(reqs, std::string(mode) == "ssd");
      const double wall = monotonic_seconds() - t0;
      res.split.drafter = since(job.remote()->drafter_stats(), before);
      account(mode, spec.drafter, spec.k, res.gen, &res.sd, wall, &res.split);
      if (args.outcome_trace) {
        std::filesystem::create_directories(*args.outcome_trace);
        sim::write_outcome_trace(
            (*args.outcome_trace / fmt::format("{}_p{}.jsonl", mode, first)).string(),
            res.outcomes);
      }
    }
    fmt::print(stderr, "prompts {}-{} of {} done\n", first + 1, first + reqs.size(),
               prompts.size());
  }
  job.finish();

  double ar_tps = 0;
  for (const auto& r : rows)
    if (r.mode == "ar") ar_tps = r.tps();
  std::string md = fmt::format(
      "| mode | drafter | k | mean acceptance length | decode tok/s | vs AR | draft s | verify s | "
      "greedy == AR | hit rate | target wait s |\n|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const auto& r : rows)
    md += fmt::format("| {} | {} | {} | {:.2f} | {:.1f} | {:.2f}x | {:.2f} | {:.2f} | {} | {} | {} |\n",
                      r.mode,
                      r.mode == "ar" ? "-" : r.drafter, r.mode == "ar" ? "-" : std::to_string(r.k),
                      r.mal(), r.tps(), ar_tps > 0 ? r.tps() / ar_tps : 0, r.draft_s, r.verify_s,
                      r.mode == "ar" || r.compared == 0 ? std::string("-")
                                                        : fmt::format("{}/{}", r.exact, r.compared),
                      r.mode == "ssd" ? r.fig.hit_rate_text() : std::string("-"),
                      r.split ? fmt::format("{:.2f}", r.fig.target_wait_s) : std::string("-"));
  const std::string context = fmt::format(
      "{} prompts x {} tokens, batch {}, temperature {}, {} threads, {} | {} | {}",
      prompts.size(), args.n_predict, args.batch, args.temp, args.threads, layout.summary(),
      session.file().summary(), build_description());
  fmt::print("{}\n{}", context, md);
  if (args.out_md) std::ofstream(*args.out_md) << context << "\n\n" << md;
  if (args.out_json) {
    nlohmann::json j;
    j["context"] = context;
    j["commit"] = build_commit();
    j["config"] = resolved_json(args);
    j["runs"] = runs;
    nlohmann::json summary = nlohmann::json::array();
    for (const auto& r : rows) {
      summary.push_back({{"mode", r.mode}, {"drafter", r.drafter}, {"k", r.k},
                         {"mean_acceptance_length", r.mal()}, {"decode_tokens_per_s", r.tps()},
                         {"speedup_vs_ar", ar_tps > 0 ? r.tps() / ar_tps : 0},
                         {"draft_time_s", r.draft_s}, {"verify_time_s", r.verify_s},
                         {"greedy_exact", r.exact}, {"greedy_compared", r.compared}});
      if (r.split) {
        nlohmann::json& e = summary.back();
        e["target_wait_s"] = r.fig.target_wait_s;
        e["bytes_exchanged"] = r.fig.bytes_exchanged;
        e["drafter_busy_s"] = r.fig.drafter.busy_s;
        if (r.mode == "ssd") {
          e["cache_hit_rate"] = r.fig.hit_rate();
          e["mean_acceptance_length_hit"] = r.fig.mean_acceptance_length_hit();
          e["mean_acceptance_length_miss"] = r.fig.mean_acceptance_length_miss();
          e["fan_out"] = r.fig.drafter.fan_out_after_hit;
          e["fan_out_after_miss"] = r.fig.drafter.fan_out_after_miss;
          e["critical_batch"] = r.fig.drafter.critical_batch;
          e["branches_planned"] = r.fig.drafter.branches_planned;
          e["branches_cached"] = r.fig.drafter.branches_cached;
          e["prespeculations_cut"] = r.fig.drafter.prespec_cut;
          e["outcome_predicted_rate"] = r.fig.predicted_rate();
        }
      }
    }
    j["summary"] = summary;
    std::ofstream(*args.out_json) << j.dump(2) << "\n";
  }
  SSD_CHECK(all_exact, "greedy SD output differed from AR (see MISMATCH lines): a bug");
  return 0;
}

}  // namespace
}  // namespace ssd
