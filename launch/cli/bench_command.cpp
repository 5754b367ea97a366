#include "launch/cli/bench_command.h"

#include <fmt/format.h>

#include <cctype>
#include <fstream>
#include <sstream>
#include <thread>

#include "actors/roles/backend_choice.h"
#include "actors/roles/drafter_factory.h"
#include "actors/roles/job.h"
#include "actors/roles/model_session.h"
#include "launch/cli/bench_table.h"
#include "launch/cli/bench_workloads.h"
#include "launch/cli/build_info.h"
#include "launch/cli/decode_flags.h"
#include "launch/cli/flags.h"
#include "launch/cli/job_flags.h"
#include "launch/cli/run_report.h"
#include "runtime/core/error.h"
#include "runtime/generate/generation.h"
#include "runtime/tokenizer/chat_template.h"
#include "runtime/train/prompt_set.h"

namespace ssd {
namespace {

struct BenchArgs : JobFlags {
  std::optional<std::filesystem::path> prompt_file;
  std::optional<std::filesystem::path> workloads;
  std::string drafters = "ngram";
  DecodeFlags decode{.n_predict = 64, .chat = true};
  int32_t max_prompts = 0;
  std::optional<std::filesystem::path> out_json;
  std::optional<std::filesystem::path> outcome_trace;
  std::optional<std::filesystem::path> out_md;
  std::optional<std::filesystem::path> round_times;
  std::string modes = "ar,sd";
  int32_t batch = 1;

  template <class V>
  void visit(V&& v) {
    visit_around(v, [&] {
      v(prompt_file, "prompt-file", "prompts, one per line ('#' comments, \\n escapes)",
        {.must_exist = true});
      v(workloads, "workloads",
        "instead of --prompt-file: a directory of prompt files, one per category (perf/workloads); "
        "one table per category and a summary",
        {.must_exist = true});
      v(drafters, "drafters", "comma-separated --drafter specs to compare against AR");
      decode.visit(v);
      v(max_prompts, "max-prompts", "use only the first N prompts (of each category); 0 = all",
        {.min = 0});
      v(out_json, "out-json", "write all runs and the summary as JSON here");
      v(outcome_trace, "outcome-trace",
        "write each batch's round outcomes (JSONL, topology/sim/outcome_trace.h) into this "
        "directory, for `ssd simulate --outcome-trace`: ar_p<first prompt>.jsonl, "
        "sd_<drafter kind>_k<k>_p<first prompt>.jsonl for a drafter in this process, "
        "<mode>_p<first prompt>.jsonl for sd/ssd on drafter ranks (with --workloads: "
        "<category>_ before each)");
      v(out_md, "out-md", "write the summary table as markdown here");
      v(round_times, "round-times",
        "write every SD round of a drafter in this process here (JSONL: category, drafter, k, "
        "prompt, round, rows verified, draft and verify seconds, tokens emitted), the times --k "
        "auto's cost curves are fitted from (perf/tools/round_costs.py summarises them)");
      v(modes, "modes",
        "comma-separated modes to run: ar, sd, ssd (sd and ssd on the drafter rank when there is "
        "one; ssd needs one)");
      v(batch, "batch", "requests decoded together (prompts are taken in groups of this size)",
        {.min = 1, .max = 256});
    });
  }
};

int run_bench(const BenchArgs& args, Cluster& cluster);

}  // namespace

int run_bench_command(int argc, const char* const* argv) {
  BenchArgs args;
  if (parse_or_print_help(argc, argv, args, "ssd bench",
                          "Compare AR with SD (and, under mpirun with a drafter rank, SSD) "
                          "for several drafters and draft lengths."))
    return 0;
  args.dist.fault = fault_plan_from_env();
  return run_on_cluster(args.dist, args.backend.backend, resolved_text(args),
                        args.target.model.string(),
                        [&](Cluster& cluster) { return run_bench(args, cluster); });
}

namespace {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, sep);)
    if (!item.empty()) out.push_back(item);
  return out;
}

// The prompt sets of the run: the one prompt file (named ""), or one per workload category.
struct PromptSet {
  std::string name;
  std::vector<std::string> prompts;
};

std::vector<PromptSet> prompt_sets(const BenchArgs& args) {
  SSD_CHECK(args.prompt_file.has_value() != args.workloads.has_value(),
            "ssd bench needs exactly one of --prompt-file FILE and --workloads DIR");
  if (args.prompt_file)
    return {PromptSet{"", read_prompt_file(args.prompt_file->string(), args.max_prompts)}};
  std::vector<PromptSet> sets;
  for (auto& c : read_workloads(*args.workloads, args.max_prompts))
    sets.push_back(PromptSet{c.name, std::move(c.prompts)});
  return sets;
}

// Everything the measurement of a prompt set needs, set up once for the run.
struct BenchSetup {
  const BenchArgs& args;
  LeaderJob& job;
  const JobSpec& spec;
  const Tokenizer& tok;
  std::optional<ChatTemplate> tmpl;
  std::vector<KChoice> ks;
  std::vector<std::string> modes;
  bool remote_drafter = false;
  // SD in this process: one drafter and one length policy per (drafter spec, --k) configuration,
  // each kept over the run's prompts. A drafter of its own per configuration means a drafter that
  // remembers earlier requests (suffix) or learns online (DVI) never sees a prompt's answer from
  // another configuration's run of the same prompt; --k auto's measured costs carry over the
  // prompts of its configuration.
  struct LocalConfig {
    std::unique_ptr<Drafter> drafter;
    std::unique_ptr<SpecLengthController> length;
    KChoice k;
  };
  std::vector<LocalConfig> local;
  std::ofstream round_times;  // --round-times, when given

  bool has_mode(const char* m) const {
    return std::find(modes.begin(), modes.end(), m) != modes.end();
  }
};

// What one prompt set measured.
struct Measured {
  BenchTable table;
  nlohmann::json runs = nlohmann::json::array();
  bool all_exact = true;
};

std::vector<GenerationRequest> make_requests(const BenchSetup& s,
                                             const std::vector<std::string>& prompts,
                                             size_t first, size_t count) {
  std::vector<GenerationRequest> reqs;
  for (size_t pi = first; pi < first + count; ++pi) {
    GenerationRequest req;
    if (s.tmpl) {
      const ChatMessage m{"user", prompts[pi]};
      req.prompt = s.tok.encode(s.tmpl->render({&m, 1}, true), true, true);
    } else {
      req.prompt = s.tok.encode(prompts[pi], true, true);
    }
    req.max_new_tokens = s.args.decode.n_predict;
    req.sampler = s.spec.sampler;
    req.stream = pi;
    if (!s.args.decode.ignore_eos) req.stop_ids = s.tok.spec().eog_ids;
    reqs.push_back(std::move(req));
  }
  return reqs;
}

// One configuration's run of a batch of requests: what each request measured (the batch's
// decode time, wall minus the prompts' prefill, is shared by its requests' tokens), checked
// against the batch's AR tokens under greedy decoding.
struct BatchRun {
  std::string mode, drafter;
  KChoice k;
  std::vector<GenerationResult> gen;
  std::vector<SdStats> sd;  // empty for AR
  double wall_s = 0;
  const SplitFigures* fig = nullptr;
};

void account(const BenchSetup& s, const std::string& category, size_t first, const BatchRun& b,
             std::vector<std::vector<int32_t>>& ar_ids, Measured& out) {
  BenchRow& row = out.table.row(b.mode, b.drafter, b.k.k, b.k.automatic);
  double prefill = 0;
  for (const auto& g : b.gen) prefill += g.prefill_s;
  row.decode_s += std::max(0.0, b.wall_s - prefill);
  for (size_t r = 0; r < b.gen.size(); ++r) {
    RunReport rep;
    rep.mode = b.mode;
    rep.drafter = b.drafter;
    rep.k = b.k.k;
    rep.auto_k = b.k.automatic;
    rep.gen = b.gen[r];
    if (!b.sd.empty()) rep.sd = b.sd[r];
    row.add_chosen_k(rep.sd.chosen_k_hist);
    row.tokens += static_cast<int64_t>(b.gen[r].tokens.size());
    row.after_first += std::max<int64_t>(0, static_cast<int64_t>(b.gen[r].tokens.size()) - 1);
    row.rounds += rep.sd.rounds;
    row.accepted += rep.sd.accepted;
    row.draft_s += rep.sd.draft_s;
    row.verify_s += rep.sd.verify_s;
    if (b.mode == "ar") ar_ids[r] = b.gen[r].tokens;
    if (b.mode != "ar" && is_greedy(s.spec.sampler) && s.has_mode("ar")) {
      row.compared++;
      if (b.gen[r].tokens == ar_ids[r]) {
        row.exact++;
      } else {
        out.all_exact = false;
        fmt::print(stderr, "MISMATCH: {}prompt {} with {} {} k={} differs from AR\n",
                   category.empty() ? "" : category + " ", first + r, b.mode, b.drafter,
                   b.k.text());
      }
    }
    nlohmann::json j = rep.to_json();
    j["prompt_index"] = first + r;
    j["batch"] = b.gen.size();
    if (!category.empty()) j["category"] = category;
    out.runs.push_back(j);
  }
  if (b.fig) {
    row.split = true;
    row.fig.add(*b.fig);
  }
}

// Writes one batch's outcome trace as `<category>_<stem>_p<first>.jsonl` under --outcome-trace.
void write_trace(const BenchSetup& s, const std::string& category, size_t first,
                 const std::string& stem, const std::vector<sim::OutcomeRecord>& records) {
  if (!s.args.outcome_trace) return;
  std::filesystem::create_directories(*s.args.outcome_trace);
  const std::string name = category.empty() ? fmt::format("{}_p{}.jsonl", stem, first)
                                            : fmt::format("{}_{}_p{}.jsonl", category, stem, first);
  sim::write_outcome_trace((*s.args.outcome_trace / name).string(), records);
}

// An AR batch's trace: one record per decode step of every request (k 0, nothing accepted); the
// first token of each comes from its prefill, as in SD.
std::vector<sim::OutcomeRecord> ar_trace(const std::vector<GenerationResult>& gen) {
  std::vector<sim::OutcomeRecord> out;
  for (size_t r = 0; r < gen.size(); ++r)
    for (size_t step = 1; step < gen[r].tokens.size(); ++step)
      out.push_back({static_cast<int64_t>(step - 1), static_cast<int32_t>(r), 0, 0, -1, {}});
  return out;
}

// "ngram:1-4" -> "ngram", "oracle:0.7 (research only)" -> "oracle": a file-name-safe kind.
std::string drafter_kind(const std::string& name) {
  std::string k = name.substr(0, name.find_first_of(": "));
  for (char& c : k)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-') c = '_';
  return k;
}

// One JSONL line per SD round of a local configuration under --round-times.
void write_round_times(BenchSetup& s, const std::string& category, size_t first,
                       const BenchSetup::LocalConfig& c, const std::vector<SdRoundTime>& rounds) {
  if (!s.round_times.is_open()) return;
  for (size_t r = 0; r < rounds.size(); ++r) {
    const nlohmann::json j = {{"category", category},        {"drafter", c.drafter->name()},
                              {"k", c.k.text()},             {"prompt", first},
                              {"round", r},                  {"rows", rounds[r].rows},
                              {"draft_s", rounds[r].draft_s}, {"verify_s", rounds[r].verify_s},
                              {"emitted", rounds[r].emitted}};
    s.round_times << j.dump() << "\n";
  }
  s.round_times.flush();
  SSD_CHECK(s.round_times.good(), "--round-times: writing {} failed", s.args.round_times->string());
}

// Every configuration of the run over one batch of requests: AR, then SD with each local
// drafter and k, then SD/SSD on the drafter ranks.
void run_batch(BenchSetup& s, const std::string& category, size_t first,
               const std::vector<GenerationRequest>& reqs, Measured& out) {
  std::vector<std::vector<int32_t>> ar_ids(reqs.size());
  TargetModel& target = s.job.target();
  if (s.has_mode("ar")) {
    const double t0 = monotonic_seconds();
    std::vector<GenerationResult> gen = generate_ar_batch(target, reqs);
    account(s, category, first,
            BatchRun{"ar", "", KChoice{0, false}, gen, {}, monotonic_seconds() - t0, nullptr},
            ar_ids, out);
    write_trace(s, category, first, "ar", ar_trace(gen));
  }
  if (s.has_mode("sd") && !s.remote_drafter)
    for (BenchSetup::LocalConfig& c : s.local) {
      SdOptions opts{.k = c.k.k, .width = s.args.decode.width, .auto_k = c.k.automatic};
      opts.length = c.length.get();
      const double t0 = monotonic_seconds();
      SdBatchResult res = generate_sd_batch(target, *c.drafter, reqs, opts);
      BatchRun b{"sd", c.drafter->name(), c.k, {}, {}, monotonic_seconds() - t0, nullptr};
      for (auto& r : res.requests) {
        b.gen.push_back(r.gen);
        b.sd.push_back(r.stats);
      }
      account(s, category, first, b, ar_ids, out);
      std::vector<sim::OutcomeRecord> trace;
      for (const SdRoundRecord& r : res.log)
        trace.push_back({r.round, r.seq, r.k, r.accepted, -1, {}});
      write_trace(s, category, first,
                  fmt::format("sd_{}_k{}", drafter_kind(c.drafter->name()), c.k.text()), trace);
      write_round_times(s, category, first, c, res.round_times);
    }
  for (const char* mode : {"sd", "ssd"}) {
    if (!s.remote_drafter || !s.has_mode(mode)) continue;
    const DrafterStatsMsg before = s.job.remote()->drafter_stats();
    const double t0 = monotonic_seconds();
    // Each mode its own memory of earlier requests: SSD must not find the answers SD just gave.
    const bool ssd = std::string(mode) == "ssd";
    RemoteDecodeResult res = s.job.remote()->run(reqs, ssd, {}, ssd ? 2 : 1);
    const double wall = monotonic_seconds() - t0;
    res.split.drafter = since(s.job.remote()->drafter_stats(), before);
    account(s, category, first,
            BatchRun{mode, s.spec.drafter, s.ks.front(), res.gen, res.sd, wall, &res.split}, ar_ids,
            out);
    write_trace(s, category, first, mode, res.outcomes);
  }
}

Measured measure(BenchSetup& s, const PromptSet& set) {
  Measured out;
  const size_t B = static_cast<size_t>(s.args.batch);
  for (size_t first = 0; first < set.prompts.size(); first += B) {
    const size_t count = std::min(set.prompts.size() - first, B);
    run_batch(s, set.name, first, make_requests(s, set.prompts, first, count), out);
    fmt::print(stderr, "{}prompts {}-{} of {} done\n", set.name.empty() ? "" : set.name + ": ",
               first + 1, first + count, set.prompts.size());
  }
  return out;
}

// Prints and writes the tables: the prompt file's, or each category's, the summary over all of
// them and the category matrix.
void report(const BenchArgs& args, const std::string& context, const std::vector<PromptSet>& sets,
            const std::vector<Measured>& measured, const nlohmann::json& cluster_info) {
  std::string md;
  nlohmann::json j;
  j["context"] = context;
  j["commit"] = build_commit();
  j["config"] = resolved_json(args);
  j.update(cluster_info);  // links and rank_places: what the ranks measured of their placement
  nlohmann::json runs = nlohmann::json::array();
  for (const auto& m : measured)
    for (const auto& r : m.runs) runs.push_back(r);
  j["runs"] = runs;
  if (!args.workloads) {
    md = measured.front().table.markdown();
    j["summary"] = measured.front().table.json();
  } else {
    BenchTable all;
    std::vector<std::string> names;
    std::vector<BenchTable> tables;
    for (size_t i = 0; i < sets.size(); ++i) {
      md += fmt::format("### {} ({} prompts)\n\n{}\n", sets[i].name, sets[i].prompts.size(),
                        measured[i].table.markdown());
      j["categories"][sets[i].name] = measured[i].table.json();
      all.merge(measured[i].table);
      names.push_back(sets[i].name);
      tables.push_back(measured[i].table);
    }
    md += fmt::format("### summary: all categories\n\n{}\n### by category\n\n{}", all.markdown(),
                      category_matrix(names, tables));
    j["summary"] = all.json();
  }
  fmt::print("{}\n{}", context, md);
  if (args.out_md) std::ofstream(*args.out_md) << context << "\n\n" << md;
  if (args.out_json) std::ofstream(*args.out_json) << j.dump(2) << "\n";
}

int run_bench(const BenchArgs& args, Cluster& cluster) {
  const RankLayout& layout = cluster.layout();
  const std::vector<PromptSet> sets = prompt_sets(args);
  std::vector<KChoice> ks;
  for (const auto& text : split(args.drafter_flags.k, ',')) ks.push_back(args.drafter_flags.k_choice(text));
  SSD_CHECK(!ks.empty(), "--k: give at least one length or auto");
  std::vector<DrafterSpec> specs;
  for (const auto& s : split(args.drafters, ',')) specs.push_back(parse_drafter_spec(s));
  const std::vector<std::string> modes = split(args.modes, ',');
  for (const auto& m : modes)
    SSD_CHECK(m == "ar" || m == "sd" || m == "ssd", "--modes: '{}' is not ar, sd or ssd", m);
  const bool remote_drafter = layout.n_drafters() > 0;
  SSD_CHECK(!remote_drafter || (specs.size() == 1 && ks.size() == 1),
            "with drafter ranks, give one --drafters spec and one --k (the drafter ranks load one "
            "drafter): got {} and {}",
            specs.size(), ks.size());

  SessionOptions so = session_options(cluster, args.target.model.string(), args.target.threads,
                                      args.target.ctx_size, args.dist);
  ModelSession session(so);
  JobSpec spec;
  spec.mode = std::find(modes.begin(), modes.end(), "ssd") != modes.end() ? "ssd" : "ar";
  spec.drafter = split(args.drafters, ',').front();
  spec.k = ks.front().k;
  spec.auto_k = ks.front().automatic;
  spec.sampler = args.decode.sampler();
  spec.drafter_options = args.drafter_flags.options(args.target.threads);
  spec.dist = args.dist;
  spec.max_batch = args.batch;
  check_job(spec, layout);
  if (!layout.is_target_leader()) return serve_rank(cluster, session, spec);
  LeaderJob job(cluster, session, spec);
  SSD_CHECK(!remote_drafter || job.remote(),
            "the drafter was lost before the benchmark began ({}): there is nothing to measure",
            job.drafter_loss() ? job.drafter_loss()->cause : "no reason given");

  BenchSetup s{args, job, spec, session.tokenizer(), std::nullopt, ks, modes, remote_drafter, {}};
  if (args.decode.chat) s.tmpl = ChatTemplate::from_spec(s.tok.spec());
  if (args.round_times) {
    s.round_times.open(*args.round_times, std::ios::trunc);
    SSD_CHECK(s.round_times.is_open(), "--round-times: cannot write {}",
              args.round_times->string());
  }
  fmt::print(stderr, "model: {} | {}\n{}\n", session.file().summary(), session.backend_summary(),
             build_description());
  if (cluster.distributed())
    fmt::print(stderr, "ranks: {}\n{}\n", layout.summary(), cluster.links().summary());
  // Build every local drafter before running anything: a bad spec fails before minutes of work.
  if (!remote_drafter && s.has_mode("sd"))
    for (const auto& sp : specs)
      for (const KChoice& kc : ks)
        s.local.push_back(BenchSetup::LocalConfig{
            make_drafter(sp, session, spec.drafter_options),
            std::make_unique<SpecLengthController>(
                SpecLengthOptions{.k_max = kc.k, .automatic = kc.automatic}),
            kc});
  {  // CUDA graphs of the run's forward sizes, before the first measured request
    WarmupPlan plan;
    plan.max_batch = args.batch;
    if (s.has_mode("sd") || s.has_mode("ssd"))
      for (const KChoice& kc : ks)
        for (int32_t k = kc.automatic ? 1 : kc.k; k <= kc.k; ++k) plan.ks.push_back(k);
    plan.width = args.decode.width;
    std::vector<Drafter*> local;
    for (const auto& c : s.local) local.push_back(c.drafter.get());
    job.warm_up(plan, GenerationRequest{}.prefill_chunk, local);
  }

  std::vector<Measured> measured;
  size_t n_prompts = 0;
  for (const PromptSet& set : sets) {
    measured.push_back(measure(s, set));
    n_prompts += set.prompts.size();
  }
  job.finish();
  for (const auto& c : s.local)  // the local --k auto policies' fitted costs
    if (c.k.automatic)
      fmt::print(stderr, "cost model at the end, sd {} k=auto: {}\n", c.drafter->name(),
                 c.length->describe());

  const std::string context = fmt::format(
      "{} prompts{} x {} tokens, batch {}, temperature {}, {} threads, {} | {} | {}", n_prompts,
      args.workloads ? fmt::format(" in {} categories", sets.size()) : std::string(),
      args.decode.n_predict, args.batch, args.decode.temp, args.target.threads, layout.summary(),
      session.file().summary(), build_description());
  // A drafter rank lost mid-run (recovery mode): the ssd/sd rows after it are the leader's lookup
  // drafts or plain decoding (DrafterLoss::fallback), not the drafter ranks'.
  const std::optional<DrafterLoss> loss = job.drafter_loss();
  report(args, context, sets, measured,
         {{"links", cluster.links().to_json()},
          {"rank_places", cluster.rank_places()},
          {"drafter_loss", loss ? loss->to_json() : nlohmann::json(nullptr)}});
  bool all_exact = true;
  for (const auto& m : measured) all_exact = all_exact && m.all_exact;
  SSD_CHECK(all_exact, "greedy SD output differed from AR (see MISMATCH lines): a bug");
  return 0;
}

}  // namespace
}  // namespace ssd
