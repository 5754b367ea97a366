#include "launch/cli/sim_command.h"

#include <fmt/format.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "launch/cli/flags.h"
#include "launch/cli/sim_calibrate.h"
#include "runtime/core/error.h"
#include "topology/sim/chrome_trace.h"
#include "topology/sim/round_sim.h"
#include "topology/sim/speed_probe.h"

namespace ssd {
namespace {

struct SimArgs {
  std::string modes = "ar,sd,ssd";
  std::string target = "llama-3.1-70b";
  std::string drafter = "llama-3.2-1b";
  std::string drafter_style = "auto";
  std::string target_device = "h100-sxm";
  std::string drafter_device;  // "" = the target's
  std::optional<std::filesystem::path> device_profile;
  int32_t tp = 1;
  std::string tp_link = "nvlink4";
  int32_t drafters = 1;
  std::string drafter_link = "nvlink4";
  bool colocated = false;
  std::string batch = "1";
  int32_t tokens = 128;
  int32_t prompt = 128;
  int32_t k = 4;
  double accept = 0.7;
  std::optional<double> mal;
  std::string accept_per_position;
  double miss_at_1 = 0.5;
  double power_r = 0.5;
  double backup_accept = 0.2;
  int32_t fan_out_budget = 8;
  int32_t prespec_chunk = 0;
  std::string miss_policy = "auto";
  int32_t critical_batch = -1;
  std::string prespec_switch = "on";
  std::string prespec_fit = "window";
  std::string miss_at = "leader";
  std::optional<double> lookup_us;
  int64_t drafter_feature_dim = -1;
  uint64_t seed = 1;
  std::optional<std::filesystem::path> outcome_trace, record_trace, trace_json, json;
  std::string job_traces, job_prompts;
  bool calibrate = false;
  bool probe = false;
  std::string speed_probe;
  std::optional<std::filesystem::path> refit;
  std::optional<std::filesystem::path> calibrate_model, out;
  int32_t threads = 2;
  int32_t calibrate_rows = 32;
  int32_t calibrate_context = 128;
  std::string calibrate_drafters;
  std::string calibrate_k = "2,4,7";
  std::string calibrate_batch = "1,4";
  int32_t calibrate_tokens = 24;
  int32_t calibrate_branches = 8;
  int32_t calibrate_repeats = 3;

  template <class V>
  void visit(V&& v) {
    v(modes, "mode", "comma-separated modes to simulate: ar, sd, ssd");
    v(target, "target", "target model: a preset (llama-3.1-70b, llama-3.2-1b, qwen3-32b, "
                        "qwen3-0.6b, smollm2-135m) or a GGUF / config.json path");
    v(drafter, "drafter", "drafter: ngram, a model preset (also smollm2-domino) or a path");
    v(drafter_style, "drafter-style", "how a model drafter drafts: ar (a forward per token), "
                                      "block (Domino: one forward per draft), auto (by preset)",
      {.choices = {"auto", "ar", "block"}});
    v(target_device, "target-device", "device preset (h100-sxm, a100-sxm-80gb, l40s, cpu) or a "
                                      "JSON profile");
    v(drafter_device, "drafter-device", "drafter ranks' device (default: the target's)");
    v(device_profile, "device-profile", "a JSON device profile for every rank (from --calibrate)",
      {.must_exist = true});
    v(tp, "tp", "target tensor-parallel degree", {.min = 1, .max = 1024});
    v(tp_link, "tp-link", "link between the target's TP ranks: shm, pcie4, pcie5, nvlink3, "
                          "nvlink4, ib400, eth25 or a JSON profile");
    v(drafters, "drafters", "drafter ranks (SSD splits its branches over them)",
      {.min = 1, .max = 1024});
    v(drafter_link, "drafter-link", "link between the target leader and the drafter ranks");
    v(colocated, "colocated", "sd: the drafter runs in the target's process (one rank, no link)");
    v(batch, "batch", "comma-separated batch sizes");
    v(tokens, "tokens", "tokens generated per sequence", {.min = 1, .max = 1 << 20});
    v(prompt, "prompt", "prompt tokens cached before decoding", {.min = 0, .max = 1 << 22});
    v(k, "k", "draft tokens per speculation", {.min = 1, .max = 32});
    v(accept, "accept", "per-position acceptance rate of the primary drafter",
      {.min = 0, .max = 1});
    v(mal, "mal", "instead of --accept: the primary's mean acceptance length at --k (bonus "
                  "included)", {.min = 1});
    v(accept_per_position, "accept-per-position", "comma-separated a_1..a_n (overrides --accept)");
    v(miss_at_1, "miss-at-1", "power law: P(bonus is not the drafter's top choice)",
      {.min = 0, .max = 1});
    v(power_r, "power-r", "power law exponent r: miss(F) = miss-at-1 x F^-r", {.min = 1e-6});
    v(backup_accept, "backup-accept", "per-position acceptance of the backup (n-gram) speculator",
      {.min = 0, .max = 1});
    v(fan_out_budget, "fan-out-budget", "ssd: branches per sequence (geometric fan-out)",
      {.min = 1, .max = 1024});
    v(prespec_chunk, "prespec-chunk", "ssd: branches per draft call, cut at the outcome; 0 = one "
                                      "call", {.min = 0, .max = 1 << 20});
    v(miss_policy, "miss-policy", "ssd: fallback on a miss", {.choices = {"auto", "not-worse",
                                                                          "primary", "backup"}});
    v(critical_batch, "critical-batch", "ssd: fixed b* for --miss-policy auto (-1: derived)",
      {.min = -1});
    v(prespec_switch, "prespec-switch", "ssd: on = pre-speculate every round (Saguaro as "
                                        "published); auto = the runtime's adaptive switch (blocks "
                                        "on or off, the faster kept); a replayed trace's recorded "
                                        "regime wins", {.choices = {"on", "auto"}});
    v(prespec_fit, "prespec-fit", "ssd, one drafter rank: window = draft only the chunks "
                                  "expected to end before the outcome (the runtime's "
                                  "draft-what-fits); all = every planned branch",
      {.choices = {"window", "all"}});
    v(miss_at, "miss-at", "ssd: who drafts a miss the drafter answers with a lookup (n-gram "
                          "primary, or the backup past b*): the target leader at once, with no "
                          "wait for an answer (the runtime's default), or the drafter rank",
      {.choices = {"leader", "drafter"}});
    v(drafter_feature_dim, "drafter-feature-dim", "floats of target features the drafter needs "
                                                  "per accepted token (EAGLE / Domino style; -1: "
                                                  "the drafter preset's)", {.min = -1});
    v(lookup_us, "lookup-us", "an n-gram lookup per sequence, microseconds (default: the "
                              "profile's measured fit, else 20)", {.min = 0});
    v(seed, "seed", "seed of the sampled outcomes (the same seed gives the same run)");
    v(outcome_trace, "outcome-trace", "replay this outcome trace (JSONL, topology/sim/"
                                      "outcome_trace.h) instead of sampling outcomes",
      {.must_exist = true});
    v(job_traces, "job-traces",
      "comma-separated outcome traces of one job's batches, replayed in order: each batch starts "
      "with the miss policy, draft-what-fits budget and pre-speculation switch the earlier ones "
      "left (one result per trace and mode)");
    v(job_prompts, "job-prompts", "with --job-traces: each batch's prompt tokens (default --prompt)");
    v(record_trace, "record-trace", "write the simulated outcomes as a trace (last mode, batch)");
    v(trace_json, "trace-json", "write the timeline as Chrome trace-event JSON (last mode, batch)");
    v(json, "json", "write every result as JSON here");
    v(calibrate, "calibrate", "measure this machine and write a CPU device profile (--out)");
    v(probe, "probe",
      "time a speed probe of the target's forwards (--calibrate-model, --threads, "
      "--calibrate-batch) and write it (--out), for --speed-probe");
    v(speed_probe, "speed-probe",
      "comma-separated speed probes (from --probe): scale every compute cost of the device "
      "profiles by the probes' speed against the target's profile (topology/sim/speed_probe.h)");
    v(refit, "refit", "refit this profile (its target with --calibrate-model, and its drafters) "
                      "from the measurements it stores, with the current fit models (--out)",
      {.must_exist = true});
    v(calibrate_model, "calibrate-model", "--calibrate: model to time (default $SSD_MODEL)");
    v(out, "out", "--calibrate: where to write the profile JSON");
    v(threads, "threads", "--calibrate: CPU threads", {.min = 1, .max = 1024});
    v(calibrate_rows, "calibrate-rows",
      "--calibrate: target forwards of 1..8 rows, then every 4th up to n (a batch-4 "
      "verification at k 7 is 32 rows)",
      {.min = 1, .max = 64});
    v(calibrate_context, "calibrate-context", "--calibrate: cached tokens before each forward",
      {.min = 0, .max = 1 << 16});
    v(calibrate_drafters, "calibrate-drafters",
      "--calibrate: comma-separated drafter specs (ngram, suffix, domino:PATH, model:PATH) to time "
      "in SD rounds and fit, with the verifier's host cost, into the profile");
    v(calibrate_k, "calibrate-k", "--calibrate-drafters: draft lengths to time");
    v(calibrate_batch, "calibrate-batch", "--calibrate-drafters: batch sizes to time");
    v(calibrate_tokens, "calibrate-tokens", "--calibrate-drafters: tokens per request of each run",
      {.min = 2, .max = 4096});
    v(calibrate_branches, "calibrate-branches",
      "--calibrate-drafters: also time one pre-speculation call of this many branches per "
      "sequence at every k and batch (a drafter reading target features gets synthetic ones; "
      "0: none)",
      {.min = 0, .max = 64});
    v(calibrate_repeats, "calibrate-repeats",
      "--calibrate-drafters: runs of each SD configuration, their median times kept",
      {.min = 1, .max = 16});
  }
};

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

double to_num(const std::string& flag, const std::string& s) {
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(s, &used);
  } catch (...) {
    used = 0;
  }
  SSD_CHECK(used == s.size() && !s.empty(), "--{}: '{}' is not a number", flag, s);
  return v;
}

std::vector<int32_t> int_list(const std::string& flag, const std::string& text, int32_t lo,
                              int32_t hi) {
  std::vector<int32_t> out;
  for (const std::string& item : split(text)) {
    const double v = to_num(flag, item);
    SSD_CHECK(v >= lo && v <= hi && v == static_cast<int32_t>(v),
              "--{}: {} must be an integer in {}..{}", flag, item, lo, hi);
    out.push_back(static_cast<int32_t>(v));
  }
  SSD_CHECK(!out.empty(), "--{}: give at least one value", flag);
  return out;
}

CalibrateOptions calibrate_options(const SimArgs& a) {
  CalibrateOptions o;
  if (a.calibrate_model) o.model = a.calibrate_model->string();
  else if (const char* env = std::getenv("SSD_MODEL")) o.model = env;
  if (a.out) o.out = *a.out;
  o.threads = a.threads;
  o.rows = a.calibrate_rows;
  o.context = a.calibrate_context;
  o.drafters = split(a.calibrate_drafters);
  o.ks = int_list("calibrate-k", a.calibrate_k, 1, 32);
  o.batches = int_list("calibrate-batch", a.calibrate_batch, 1, 64);
  o.tokens = a.calibrate_tokens;
  o.branches = a.calibrate_branches;
  o.repeats = a.calibrate_repeats;
  return o;
}

sim::SimConfig build_config(const SimArgs& a) {
  sim::SimConfig c;
  sim::SimCluster& cl = c.cluster;
  if (a.device_profile) {
    cl.target_device = cl.drafter_device = sim::load_device(a.device_profile->string());
  } else {
    cl.target_device = sim::load_device(a.target_device);
    cl.drafter_device =
        a.drafter_device.empty() ? cl.target_device : sim::load_device(a.drafter_device);
  }
  cl.tp = a.tp;
  cl.tp_link = sim::load_link(a.tp_link);
  cl.drafters = a.drafters;
  cl.drafter_link = sim::load_link(a.drafter_link);
  cl.colocated = a.colocated;
  c.target = sim::load_model_shape(a.target);
  if (a.drafter == "ngram" || a.drafter == "suffix") {
    c.drafter.shape.name = a.drafter;
    c.drafter.shape.style = sim::DraftStyle::kLookup;
  } else {
    c.drafter.shape = sim::load_model_shape(a.drafter);
    if (a.drafter_style == "ar") c.drafter.shape.style = sim::DraftStyle::kAutoregressive;
    if (a.drafter_style == "block") c.drafter.shape.style = sim::DraftStyle::kBlock;
  }
  if (a.drafter_feature_dim >= 0) c.drafter.shape.feature_dim = a.drafter_feature_dim;
  if (a.lookup_us) {  // a given lookup cost wins over a measured one
    c.drafter.lookup_s = c.backup.lookup_s = *a.lookup_us * 1e-6;
    for (sim::DeviceProfile* d : {&cl.target_device, &cl.drafter_device})
      for (const char* n : {"ngram", "suffix"}) d->drafter_fits.erase(n);
  }
  c.backup.shape.name = "ngram";
  c.backup.shape.style = sim::DraftStyle::kLookup;
  c.work = {.batch = 1, .tokens = a.tokens, .prompt = a.prompt, .k = a.k};
  c.primary.a = a.mal ? sim::acceptance_for_mean_tokens(*a.mal, a.k) : a.accept;
  for (const std::string& s : split(a.accept_per_position))
    c.primary.per_position.push_back(to_num("accept-per-position", s));
  c.primary.miss_at_1 = a.miss_at_1;
  c.primary.r = a.power_r;
  c.backup_acc = c.primary;
  c.backup_acc.per_position.clear();
  c.backup_acc.a = a.backup_accept;
  c.ssd.budget = a.fan_out_budget;
  c.ssd.chunk = a.prespec_chunk;
  c.ssd.miss = parse_miss_choice(a.miss_policy);
  c.ssd.b_star = a.critical_batch;
  c.ssd.adaptive_switch = a.prespec_switch == "auto";
  c.ssd.fit_window = a.prespec_fit == "window";
  c.ssd.miss_at_leader = a.miss_at == "leader";
  c.seed = a.seed;
  return c;
}

nlohmann::json result_json(const sim::SimResult& r, int32_t batch, double ar_tps) {
  return {{"mode", sim::mode_name(r.mode)},
          {"batch", batch},
          {"tokens_per_s", r.tokens_per_s()},
          {"speedup_vs_ar", ar_tps > 0 ? r.tokens_per_s() / ar_tps : 0},
          {"seconds", r.seconds},
          {"tokens", r.tokens},
          {"rounds", r.rounds},
          {"seq_rounds", r.seq_rounds},
          {"mean_acceptance_length", r.mal()},
          {"hit_rate", r.hit_rate()},
          {"hits", r.hits},
          {"misses", r.misses},
          {"planned_rate", r.hits + r.misses ? double(r.planned) / double(r.hits + r.misses) : 0},
          {"fallback_primary", r.fallback_primary},
          {"fallback_backup", r.fallback_backup},
          {"leader_drafted", r.leader_drafted},
          {"rounds_waited", r.rounds_waited},
          {"branches_planned", r.branches_planned},
          {"branches_drafted", r.branches_drafted},
          {"target_busy_s", r.target_busy_s},
          {"target_wait_s", r.target_wait_s},
          {"drafter_busy_s", r.drafter_busy_s},
          {"comm_s", r.comm_s},
          {"critical_batch", r.b_star},
          {"fan_out", r.fan_out}};
}

std::string pct(double x, double total) {
  return total > 0 ? fmt::format("{:.0f}%", 100 * x / total) : "-";
}

}  // namespace

int run_sim_command(int argc, const char* const* argv) {
  SimArgs a;
  if (parse_or_print_help(argc, argv, a, "ssd simulate",
                          "Predict AR / SD / SSD tok/s on a described cluster (event-by-event "
                          "round simulation with roofline costs), or --calibrate a CPU "
                          "profile."))
    return 0;
  if (a.calibrate && a.probe) fail("--calibrate and --probe: give one");
  if (a.calibrate) return run_calibrate(calibrate_options(a));
  if (a.probe) return run_probe(calibrate_options(a));
  if (a.refit) {
    SSD_CHECK(a.out.has_value(), "--refit needs --out PATH for the refitted profile");
    return run_refit(*a.refit, a.calibrate_model ? a.calibrate_model->string() : "", *a.out);
  }

  sim::SimConfig cfg = build_config(a);
  double speed_scale = 1;  // --speed-probe: the machine's speed at the job's time
  if (!a.speed_probe.empty()) {
    sim::SimCluster& cl = cfg.cluster;
    speed_scale = sim::probe_scale(cfg.target, cl.target_device,
                                   sim::read_probe_samples(split(a.speed_probe)));
    cl.target_device = sim::scaled_profile(cl.target_device, speed_scale);
    cl.drafter_device = sim::scaled_profile(cl.drafter_device, speed_scale);
    fmt::print("speed probe: every compute cost x {:.3f} (the probe's forwards against the "
               "profile's)\n",
               speed_scale);
  }
  std::vector<sim::SimMode> modes;
  for (const std::string& m : split(a.modes)) modes.push_back(sim::parse_mode(m));
  SSD_CHECK(!modes.empty(), "--mode: no mode given");
  std::vector<int32_t> batches;
  for (const std::string& b : split(a.batch)) {
    const double v = to_num("batch", b);
    SSD_CHECK(v >= 1 && v <= 4096 && v == static_cast<int32_t>(v),
              "--batch: {} must be an integer in 1..4096", b);
    batches.push_back(static_cast<int32_t>(v));
  }
  SSD_CHECK(!batches.empty(), "--batch: no batch size given");
  // Replayed batches: --outcome-trace (one), or --job-traces (a job's, in order), each with its
  // prompt length.
  std::vector<std::vector<sim::OutcomeRecord>> traces;
  std::vector<int32_t> prompts;
  SSD_CHECK(!(a.outcome_trace && !a.job_traces.empty()),
            "give --outcome-trace or --job-traces, not both");
  if (a.outcome_trace) traces.push_back(sim::read_outcome_trace(a.outcome_trace->string()));
  for (const std::string& p : split(a.job_traces)) traces.push_back(sim::read_outcome_trace(p));
  for (const std::string& p : split(a.job_prompts)) {
    const double v = to_num("job-prompts", p);
    SSD_CHECK(v >= 0 && v <= (1 << 22) && v == static_cast<int32_t>(v),
              "--job-prompts: {} must be an integer in 0..{}", p, 1 << 22);
    prompts.push_back(static_cast<int32_t>(v));
  }
  SSD_CHECK(prompts.empty() || prompts.size() == traces.size(),
            "--job-prompts: {} lengths for {} traces", prompts.size(), traces.size());
  if (prompts.empty()) prompts.assign(traces.size(), a.prompt);
  SSD_CHECK(traces.empty() || batches.size() == 1,
            "--outcome-trace: the trace sets the batch; give no --batch list");
  const bool trace = !traces.empty();
  cfg.record_events = a.trace_json.has_value();
  cfg.validate();

  fmt::print("target {} on {} x TP {} ({}), drafter {} on {} rank(s) of {} over {}{}\n",
             cfg.target.name, cfg.cluster.target_device.name, cfg.cluster.tp, a.tp_link,
             cfg.drafter.shape.name, cfg.cluster.drafters, cfg.cluster.drafter_device.name,
             a.drafter_link, cfg.cluster.colocated ? " (colocated)" : "");
  fmt::print("k {}, acceptance a = {:.3f} (MAL {:.2f}), miss(F) = {:.2f} F^-{:.2f}, budget {}, "
             "chunk {}, {} tokens after a {}-token prompt{}\n\n",
             cfg.work.k, cfg.primary.a, cfg.primary.expected_tokens(cfg.work.k),
             cfg.primary.miss_at_1, cfg.primary.r, cfg.ssd.budget, cfg.ssd.chunk, cfg.work.tokens,
             cfg.work.prompt,
             trace ? ", replaying " + (a.outcome_trace ? a.outcome_trace->string() : a.job_traces)
                   : "");
  fmt::print("| batch | mode | tok/s | vs AR | MAL | hit rate | rounds | target busy | target "
             "waits | drafter busy | comm | b* |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  nlohmann::json all = nlohmann::json::array();
  sim::SimResult last;
  std::map<sim::SimMode, sim::SimCarry> carry;  // --job-traces: per mode, batch to batch
  const size_t units = trace ? traces.size() : batches.size();
  for (size_t u = 0; u < units; ++u) {
    const std::vector<sim::OutcomeRecord>* replay = trace ? &traces[u] : nullptr;
    const int32_t b = trace ? batches[0] : batches[u];
    cfg.work.batch = b;
    if (trace) cfg.work.prompt = prompts[u];
    double ar_tps = 0;
    const sim::AnalyticEstimate th = sim::analytic_estimate(cfg);
    for (sim::SimMode m : modes) {
      sim::SimResult r = sim::simulate(m, cfg, replay, a.job_traces.empty() ? nullptr : &carry[m]);
      if (m == sim::SimMode::kAr) ar_tps = r.tokens_per_s();
      const int32_t shown_b = trace ? sim::summarize(*replay).sequences : b;
      fmt::print("| {} | {} | {:.1f} | {} | {:.2f} | {} | {} | {} | {} | {} | {} | {} |\n", shown_b,
                 sim::mode_name(m), r.tokens_per_s(),
                 ar_tps > 0 ? fmt::format("{:.2f}x", r.tokens_per_s() / ar_tps) : "-", r.mal(),
                 m == sim::SimMode::kSsd ? fmt::format("{:.2f}", r.hit_rate()) : "-", r.rounds,
                 pct(r.target_busy_s, r.seconds), pct(r.target_wait_s, r.seconds),
                 m == sim::SimMode::kAr ? "-" : pct(r.drafter_busy_s, r.seconds),
                 pct(r.comm_s, r.seconds), m == sim::SimMode::kSsd ? fmt::format("{}", r.b_star) : "-");
      nlohmann::json rj = result_json(r, shown_b, ar_tps);
      rj["theory"] = {{"tokens_per_s", m == sim::SimMode::kAr   ? th.ar_tokens_per_s
                                       : m == sim::SimMode::kSd ? th.sd_tokens_per_s
                                                                : th.ssd_tokens_per_s},
                      {"verify_s", th.verify_s},
                      {"draft_s", th.draft_s},
                      {"prespec_s", th.prespec_s},
                      {"fallback_s", th.fallback_s},
                      {"hit_rate", th.hit_rate}};
      all.push_back(std::move(rj));
      last = std::move(r);
    }
  }
  fmt::print("\nsimulated (not measured): decode only, percentages of the simulated time; comm "
             "sums TP collectives and drafter-link messages.\n");
  if (a.json) {
    std::ofstream o(a.json->string());
    SSD_CHECK(o.good(), "cannot write '{}'", a.json->string());
    o << nlohmann::json{{"config", resolved_json(a)}, {"speed_scale", speed_scale}, {"results", all}}.dump(2) << '\n';
  }
  if (a.record_trace) sim::write_outcome_trace(a.record_trace->string(), last.outcomes);
  if (a.trace_json)
    sim::write_chrome_trace(a.trace_json->string(), last.events,
                            fmt::format("simulated {}", sim::mode_name(last.mode)));
  return 0;
}

}  // namespace ssd
