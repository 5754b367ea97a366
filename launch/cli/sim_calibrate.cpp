// Target forwards are timed with ForwardTimer (the code `ssd bench-kernels` uses); drafters run
// the runtime's own SD loop (generate_sd_batch) on the target, so a round's drafting includes
// what a real round pays around the forwards: the commit of the outcome, Domino's GRU head and
// features, sampling. One warm-up run per drafter precedes its measured runs.
#include "launch/cli/sim_calibrate.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <optional>
#include <nlohmann/json.hpp>

#include "actors/roles/drafter_factory.h"
#include "actors/roles/model_session.h"
#include "kernels/cpu/thread_pool.h"
#include "launch/cli/bench_kernels_measure.h"
#include "launch/cli/build_info.h"
#include "runtime/backend/cpu/cpu_backend.h"
#include "runtime/core/error.h"
#include "runtime/core/median.h"
#include "runtime/generate/generation.h"
#include "runtime/spec/sd_generation.h"
#include "topology/sim/cpu_calibration.h"
#include "topology/sim/drafter_calibration.h"
#include "topology/sim/speed_probe.h"

namespace ssd {
namespace {

constexpr int64_t kProbeBlock = 12;  // rows of the speed probe's verification-sized block

// Prose for the drafters' prompts (timing barely depends on the words; an n-gram lookup finds
// some repeats in it, as in real text).
constexpr const char* kText =
    "The lighthouse keeper wrote in his log every evening. The wind came from the west, the "
    "sea was calm, and the lamp was lit at six. The next evening the wind came from the north, "
    "the sea was rough, and the lamp was lit at five. He wrote the same lines each night, and "
    "each night the lines changed a little: the wind, the sea, the hour of the lamp. Years "
    "later, a visitor read the log from the first page to the last and found that the keeper "
    "had written a history of the weather, of the ships that passed, and of himself.";

std::vector<int32_t> prompt_tokens(const Tokenizer& tok, int32_t length, int32_t offset) {
  const std::vector<int32_t> text = tok.encode(kText, false, false);
  SSD_CHECK(!text.empty(), "calibration: the tokenizer encoded the prompt text to nothing");
  std::vector<int32_t> out;
  for (int32_t i = 0; i < length; ++i) out.push_back(text[(offset + i) % text.size()]);
  return out;
}

// Whether the drafter takes in the prompt lazily, in its first draft call (a model drafter:
// model_draft_runner.h) rather than in start() (Domino builds its context from the prompt's
// target features in set_features(), inside sd_generation's start(); a lookup indexes there).
bool lazy_start(const std::string& spec) { return parse_drafter_spec(spec).kind == "model"; }

// One drafter's fit, printed as a table of its samples' measured and fitted milliseconds.
void print_fit(const std::string& spec, const sim::SimDrafter& sd,
               const sim::DrafterCalibration& cal, const std::vector<sim::DraftSample>& samples,
               const std::vector<std::pair<int32_t, int32_t>>& k_batch,
               const std::vector<int64_t>& rounds) {
  fmt::print("\ndrafter {} (simulated as --drafter {}): one SD round's drafting, and one "
             "pre-speculation call of `branches` per sequence\n\n"
             "| k | batch | rounds (SD) or branches | measured ms | fitted ms | error |\n"
             "|---|---|---|---|---|---|\n",
             spec, sd.shape.name);
  for (size_t i = 0; i < samples.size(); ++i) {
    const double m = samples[i].seconds, p = cal.predicted_s[i];
    const std::string what = rounds[i] < 0    ? fmt::format("{} branches", -rounds[i])
                             : rounds[i] == 0 ? std::string("start on the prompts")
                                              : fmt::format("{}", rounds[i]);
    fmt::print("| {} | {} | {} | {:.3f} | {:.3f} | {:+.1f}% |\n", k_batch[i].first,
               k_batch[i].second, what, m * 1e3, p * 1e3, 100 * (p - m) / m);
  }
  const sim::DrafterFit& f = cal.fit;
  fmt::print("\nfit: {:.2f} of the bandwidth, {:.1f} GFLOP/s, {:.3f} ms per forward, {:.3f} ms "
             "per call, {:.1f} us per lookup, {:.1f} us per ranked row; error median {:.1f}%, "
             "worst {:.1f}%\n",
             f.mem_efficiency, f.peak_flops / 1e9, f.forward_s * 1e3, f.call_s * 1e3,
             f.lookup_s * 1e6, f.rank_row_s * 1e6, 100 * f.median_rel_err, 100 * f.max_rel_err);

}

struct DrafterRun {
  sim::TargetSample target;  // an SD run's verification forwards (rows 0 for a branch batch)
  int32_t k = 0, batch = 0;
  int64_t forwards = 0;     // rounds of an SD run; 0 for a branch batch or a start
  int32_t branches = 0;     // a branch batch: branches per sequence (0 for an SD run)
  bool start = false;       // a model drafter's start on the batch's prompts (time_start)
  sim::DraftSample sample;
};

// `rows` x `dim` feature values for a calibration call: small, bounded and varied (a row of zeros
// would be a degenerate input to the drafter's norms).
std::vector<float> synthetic_features(int64_t rows, int64_t dim) {
  std::vector<float> f(static_cast<size_t>(rows * dim));
  for (size_t i = 0; i < f.size(); ++i) f[i] = 0.5f * std::sin(0.37f * static_cast<float>(i % 4093));
  return f;
}

// SSD's pre-speculation shape, timed directly: for every (k, batch), one draft() call of
// `branches` requests per sequence, request j with a hypothetical suffix of j mod (k + 1) + 1
// tokens (an outcome's accepted tokens and bonus), k + 1 tokens drafted (the last for the
// ranking) and the ranking asked, as SsdDrafterCore::draft_branches asks. The SD rounds alone
// never draft more than a few rows per forward; these calls draft batch x branches, the range
// the simulator prices pre-speculation in. Median of 3 calls after a warm-up call. A drafter
// that reads target features (Domino) gets synthetic rows for the prompt: its cost does not
// depend on their values (dense matmuls, a GRU walk of fixed length), only on their count.
std::vector<DrafterRun> time_branches(const CalibrateOptions& o, ModelSession& session,
                                      Drafter& drafter) {
  std::vector<DrafterRun> out;
  if (o.branches <= 0) return out;
  const int64_t fdim = drafter.target_feature_layers().empty() ? 0 : drafter.target_feature_dim();
  for (int32_t k : o.ks)
    for (int32_t b : o.batches) {
      std::vector<DraftRequest> reqs;
      for (int32_t i = 0; i < b; ++i) {
        const int32_t seq = 1000 + i;
        const std::vector<int32_t> p = prompt_tokens(session.tokenizer(), o.context + 1, 7 * i);
        drafter.start(seq, std::span<const int32_t>(p).first(o.context));
        drafter.commit(seq, std::span<const int32_t>(p).last(1));
        if (fdim > 0) drafter.set_features(seq, 0, synthetic_features(o.context, fdim));
        DraftRequest catch_up;  // the prompt's catch-up, not timed
        catch_up.seq = seq;
        catch_up.k = 1;
        drafter.draft({&catch_up, 1});
        for (int32_t j = 0; j < o.branches; ++j) {
          DraftRequest r;
          r.seq = seq;
          r.suffix = prompt_tokens(session.tokenizer(), j % (k + 1) + 1, 3 * j + i);
          r.k = k + 1;
          r.predict_top = o.branches + 1;
          r.position = static_cast<uint32_t>(j);
          reqs.push_back(std::move(r));
        }
      }
      drafter.draft(reqs);  // warm-up
      std::vector<double> t;
      for (int rep = 0; rep < 3; ++rep) {
        const double t0 = monotonic_seconds();
        drafter.draft(reqs);
        t.push_back(monotonic_seconds() - t0);
      }
      std::sort(t.begin(), t.end());
      for (int32_t i = 0; i < b; ++i) drafter.finish(1000 + i);
      double suffix = 0;
      for (const DraftRequest& r : reqs) suffix += static_cast<double>(r.suffix.size());
      DrafterRun d{{0, 0, 0, 0}, k, b, 0, o.branches, {}};
      d.sample.n = static_cast<double>(reqs.size());
      d.sample.kv_seqs = b;
      d.sample.suffix = suffix / static_cast<double>(reqs.size());
      d.sample.k = k;
      d.sample.predict_bonus = true;
      d.sample.context = o.context + 1;
      d.sample.seconds = std::max(1e-9, t[1]);
      out.push_back(d);
    }
  return out;
}

// A lazily started drafter's start, timed alone: `b` sequences started on the SD runs' prompts,
// then one draft call of 1 token each (the runner's catch-up over each prompt and one logits row
// per sequence, as a run's first call begins). Median of 3 after a warm-up.
DrafterRun time_start(const CalibrateOptions& o, ModelSession& session, Drafter& drafter,
                      int32_t b) {
  std::vector<double> t;
  for (int rep = 0; rep < 4; ++rep) {
    std::vector<DraftRequest> reqs(static_cast<size_t>(b));
    for (int32_t i = 0; i < b; ++i) {
      const std::vector<int32_t> p = prompt_tokens(session.tokenizer(), o.context, 11 * i);
      drafter.start(2000 + i, p);
      reqs[i].seq = 2000 + i;
      reqs[i].k = 1;
    }
    const double t0 = monotonic_seconds();
    drafter.draft(reqs);
    if (rep > 0) t.push_back(monotonic_seconds() - t0);
    for (int32_t i = 0; i < b; ++i) drafter.finish(2000 + i);
  }
  DrafterRun d{{}, 1, b, 0, 0, true, {}};
  d.sample.n = b;
  d.sample.suffix = static_cast<double>(o.context) - 1;  // + the token held back: the prompt
  d.sample.k = 1;
  d.sample.seconds = std::max(1e-9, median(t));
  return d;
}

// Times `spec` in SD rounds at every (k, batch); adds the verifier's host cost of each run to
// `host` as (rows per forward, seconds per forward). A lazily started drafter's start is timed
// alone at every batch (time_start) and its runs carry it as measured.
std::vector<DrafterRun> time_drafter(const CalibrateOptions& o, ModelSession& session,
                                     const std::string& spec,
                                     std::vector<std::pair<double, double>>& host) {
  DrafterOptions dopts;
  dopts.threads = o.threads;
  std::unique_ptr<Drafter> drafter = make_drafter(parse_drafter_spec(spec), session, dopts);
  LocalTarget target(session.model(), session.kv(), &session.picker());
  auto run = [&](int32_t k, int32_t b) {
    std::vector<GenerationRequest> reqs(static_cast<size_t>(b));
    for (int32_t i = 0; i < b; ++i) {
      reqs[i].prompt = prompt_tokens(session.tokenizer(), o.context, 11 * i);
      reqs[i].max_new_tokens = o.tokens;
      reqs[i].stream = static_cast<uint64_t>(i);
    }
    return generate_sd_batch(target, *drafter, reqs, SdOptions{.k = k});
  };
  run(o.ks.front(), o.batches.front());  // warm-up
  std::vector<DrafterRun> out;
  std::map<int32_t, double> start_s;  // batch -> the start's seconds
  if (lazy_start(spec))
    for (int32_t b : o.batches) {
      out.push_back(time_start(o, session, *drafter, b));
      start_s[b] = out.back().sample.seconds;
    }
  for (int32_t k : o.ks)
    for (int32_t b : o.batches) {
      // Greedy: every repeat makes the same rounds; only the times differ (their medians kept).
      std::vector<double> draft, forward, verify_host;
      SdStats s;
      for (int32_t rep = 0; rep < std::max(1, o.repeats); ++rep) {
        const SdBatchResult r = run(k, b);
        s = r.stats;
        SSD_CHECK(s.forwards > 0, "calibration: the {} run at k {} batch {} made no round", spec,
                  k, b);
        const double fw = static_cast<double>(s.forwards);
        draft.push_back((s.draft_s - r.drafter_start_s) / fw);
        forward.push_back(s.target_forward_s / fw);
        verify_host.push_back(std::max(0.0, s.verify_s - s.target_forward_s) / fw);
      }
      const double fw = static_cast<double>(s.forwards);
      DrafterRun d{{}, k, b, s.forwards, 0, {}};
      d.sample.n = static_cast<double>(s.rounds) / fw;
      d.sample.suffix = s.mean_acceptance_length();
      d.sample.k = k;
      d.sample.context = o.context + 0.5 * o.tokens;
      d.sample.seconds = std::max(1e-9, median(draft));
      // A model drafter's first call catches up on the prompt, inside the timed drafting.
      d.sample.start_seqs = lazy_start(spec) ? b : 0;
      d.sample.start_prompt = o.context;
      d.sample.calls = fw;
      if (start_s.count(b)) d.sample.start_s = start_s[b];
      d.target = {static_cast<double>(s.verified_rows) / fw, d.sample.n, o.context + 0.5 * o.tokens,
                  median(forward)};
      out.push_back(d);
      host.emplace_back(static_cast<double>(s.verified_rows) / fw, median(verify_host));
    }
  for (DrafterRun& d : time_branches(o, session, *drafter)) out.push_back(std::move(d));
  return out;
}

// A speed probe (topology/sim/speed_probe.h) as JSON samples: the calibration's shapes at a
// fraction of its samples: one row, a verification-sized block and a decode batch of every
// o.batches size above 1, after o.context cached tokens.
nlohmann::json probe_json(const CalibrateOptions& o, const ModelFile& file) {
  const int32_t max_batch = *std::max_element(o.batches.begin(), o.batches.end());
  ForwardTimer timer(file, make_cpu_backend(CpuBackendOptions{o.threads, {}, 200}), o.context,
                     std::max<int64_t>(kProbeBlock, (o.context + 32) * max_batch), 1);
  nlohmann::json samples = nlohmann::json::array();
  auto add = [&](int64_t rows, int64_t seqs, const Stat& s) {
    samples.push_back({{"rows", rows}, {"seqs", seqs}, {"context", o.context},
                       {"median_s", s.median}, {"min_s", s.min}, {"max_s", s.max}});
    fmt::print("probe: {} row(s) over {} sequence(s): {:.3f} ms ({:.3f}..{:.3f})\n", rows, seqs,
               s.median * 1e3, s.min * 1e3, s.max * 1e3);
  };
  for (int64_t n : {int64_t{1}, kProbeBlock}) add(n, 1, timer.block_seconds(n, true, 4, 5));
  for (int32_t b : o.batches)
    if (b > 1) add(b, b, timer.decode_batch_seconds(b, 4, 5, true));
  return samples;
}

// One drafter's fit at the profile's speed from runs timed while the machine ran s times the
// profile's time (sim::fit_drafter_at_speed), printed.
sim::DrafterCalibration fit_at_profile_speed(const std::string& spec, const sim::SimDrafter& sd,
                                             const sim::DeviceProfile& profile, double s,
                                             const std::vector<sim::DraftSample>& samples,
                                             const std::vector<std::pair<int32_t, int32_t>>& kb,
                                             const std::vector<int64_t>& rounds,
                                             const sim::ModelShape* target,
                                             const std::vector<sim::TargetSample>& verifies) {
  if (s != 1)
    fmt::print("\ndrafter {}: the machine ran x {:.3f} the profile's time around its runs (speed "
               "probes); fitted at that speed, stored at the profile's\n",
               spec, s);
  const sim::DrafterCalibration cal =
      sim::fit_drafter_at_speed(sd, profile, s, samples, target, verifies);
  print_fit(spec, sd, cal, samples, kb, rounds);
  fmt::print("the target's verification forwards in this drafter's SD rounds: {:.3f} ms more "
             "than back to back, + {:.3f} ms per sequence beyond the first (at the profile's "
             "speed)\n",
             cal.fit.target_switch_s * 1e3, cal.fit.target_seq_s * 1e3);
  return cal;
}

nlohmann::json calibrate_drafters(const CalibrateOptions& o, sim::DeviceProfile& profile) {
  SessionOptions so;
  so.model_path = o.model;
  so.threads = o.threads;
  ModelSession session(so);
  std::vector<std::pair<double, double>> host;
  nlohmann::json meas = nlohmann::json::object();
  const sim::ModelShape target_shape = sim::load_model_shape(o.model);
  const ModelFile file = ModelFile::open(o.model);
  for (const std::string& spec : o.drafters) {
    const sim::SimDrafter sd = sim_drafter_for_spec(spec);
    nlohmann::json probe = probe_json(o, file);
    const size_t host_before = host.size();
    const std::vector<DrafterRun> runs = time_drafter(o, session, spec, host);
    for (const nlohmann::json& x : probe_json(o, file)) probe.push_back(x);
    const double s = sim::probe_scale(target_shape, profile,
                                      sim::probe_samples(probe, "the calibration's speed probe"));
    for (size_t i = host_before; i < host.size(); ++i) host[i].second /= s;
    std::vector<sim::DraftSample> samples;
    for (const DrafterRun& r : runs) samples.push_back(r.sample);
    std::vector<std::pair<int32_t, int32_t>> kb;
    std::vector<int64_t> rounds;
    for (const DrafterRun& r : runs) {
      kb.emplace_back(r.k, r.batch);
      rounds.push_back(r.branches > 0 ? -r.branches : r.forwards);  // 0: a start
    }
    std::vector<sim::TargetSample> verifies;
    for (const DrafterRun& r : runs)
      if (r.target.rows > 0) verifies.push_back(r.target);
    const sim::DrafterCalibration cal =
        fit_at_profile_speed(spec, sd, profile, s, samples, kb, rounds, &target_shape, verifies);
    profile.drafter_fits[sd.shape.name] = cal.fit;
    nlohmann::json rows = nlohmann::json::array();
    for (size_t i = 0; i < runs.size(); ++i) {
      nlohmann::json row = {{"k", runs[i].k}, {"batch", runs[i].batch},
                            {"rounds", runs[i].forwards}, {"sequences", runs[i].sample.n},
                            {"suffix", runs[i].sample.suffix},
                            {"median_s", runs[i].sample.seconds},
                            {"fitted_s", cal.predicted_s[i]}};
      if (runs[i].branches > 0) row["branches"] = runs[i].branches;
      if (runs[i].start) row["start"] = true;
      if (runs[i].sample.start_s >= 0) row["start_s"] = runs[i].sample.start_s;
      if (runs[i].target.rows > 0) {
        row["verified_rows"] = runs[i].target.rows;
        row["target_forward_s"] = runs[i].target.seconds;
      }
      rows.push_back(row);
    }
    meas[sd.shape.name] = {{"spec", spec}, {"runs", rows}, {"context", o.context},
                           {"tokens", o.tokens}, {"probe", probe}, {"speed_scale", s}};
  }
  sim::fit_verify_host(profile, host);
  fmt::print("\nverifier host cost per target forward: {:.3f} ms + {:.4f} ms per row\n",
             profile.verify_host_s * 1e3, profile.verify_host_row_s * 1e3);
  return meas;
}

}  // namespace

sim::SimDrafter sim_drafter_for_spec(const std::string& text) {
  const DrafterSpec spec = parse_drafter_spec(text);
  sim::SimDrafter d;
  if (spec.kind == "ngram" || spec.kind == "suffix") {
    d.shape.name = spec.kind;
    d.shape.style = sim::DraftStyle::kLookup;
  } else if (spec.kind == "domino") {
    d.shape = sim::model_preset("smollm2-domino");
  } else if (spec.kind == "model") {
    d.shape = sim::load_model_shape(spec.arg);
    d.shape.style = sim::DraftStyle::kAutoregressive;
  } else {
    fail(fmt::format("--calibrate-drafters: cannot calibrate '{}' (ngram, suffix, domino:PATH or "
                     "model:PATH)",
                     text));
  }
  return d;
}

int run_refit(const std::filesystem::path& in, const std::string& model,
              const std::filesystem::path& out) {
  std::ifstream f(in);
  SSD_CHECK(f.good(), "--refit: cannot read '{}'", in.string());
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(f);
  } catch (const nlohmann::json::exception& e) {
    fail(fmt::format("--refit: '{}' is not JSON: {}", in.string(), e.what()));
  }
  sim::DeviceProfile profile = sim::DeviceProfile::from_json(j, in.string());
  // The target's forwards (with the model whose shape they were timed on).
  if (!model.empty() && j.contains("measurements") && j["measurements"].is_array()) {
    std::vector<sim::ForwardSample> samples;
    for (const nlohmann::json& m : j["measurements"])
      samples.push_back({m.at("rows").get<double>(), m.at("context").get<double>(),
                         m.at("median_s").get<double>(), m.value("seqs", 1.0)});
    const sim::Calibration cal =
        sim::fit_device(profile.name, sim::load_model_shape(model), profile.mem_bw_Bps, samples,
                        profile.kv_seq_pos_layer_s, profile.kv_row_pos_layer_s);
    sim::DeviceProfile d = cal.profile;
    d.source = profile.source + " (refitted)";
    d.verify_host_s = profile.verify_host_s;
    d.verify_host_row_s = profile.verify_host_row_s;
    d.drafter_fits = profile.drafter_fits;
    profile = d;
    fmt::print("target: fit error median {:.1f}%, worst {:.1f}% (roofline_p {})\n",
               100 * cal.median_rel_err, 100 * cal.max_rel_err, d.roofline_p);
  }
  const auto meas = j.find("drafter_measurements");
  SSD_CHECK(meas == j.end() || meas->is_object(),
            "--refit: '{}': drafter_measurements must be an object", in.string());
  for (const auto& [name, m] : meas == j.end() ? nlohmann::json::object().items() : meas->items()) {
    const std::string where = fmt::format("{}: drafter_measurements.{}", in.string(), name);
    SSD_CHECK(m.contains("spec") && m.contains("runs") && m["runs"].is_array(),
              "{}: needs 'spec' and 'runs'", where);
    const sim::SimDrafter sd = sim_drafter_for_spec(m["spec"].get<std::string>());
    // Profiles written before these fields were stored used the defaults (128, 24).
    const double context = m.value("context", 128.0), tokens = m.value("tokens", 24.0);
    std::vector<sim::DraftSample> samples;
    std::vector<std::pair<int32_t, int32_t>> kb;
    std::vector<int64_t> rounds;
    for (const nlohmann::json& r : m["runs"]) {
      sim::DraftSample s;
      s.n = r.at("sequences").get<double>();
      s.suffix = r.at("suffix").get<double>();
      s.k = r.at("k").get<int32_t>();
      s.seconds = r.at("median_s").get<double>();
      const int32_t branches = r.value("branches", 0);
      if (r.value("start", false)) {  // a start on the prompts (time_start): cached context 0
        s.context = 0;
      } else if (branches > 0) {  // a pre-speculation call (time_branches)
        s.kv_seqs = r.at("batch").get<double>();
        s.predict_bonus = true;
        s.context = context + 1;
      } else {
        s.context = context + 0.5 * tokens;
        s.start_seqs = lazy_start(m["spec"].get<std::string>()) ? r.at("batch").get<double>() : 0;
        s.start_prompt = context;
        s.calls = r.at("rounds").get<double>();
        s.start_s = r.value("start_s", -1.0);  // profiles before the start was timed: priced
      }
      samples.push_back(s);
      kb.emplace_back(s.k, r.at("batch").get<int32_t>());
      rounds.push_back(branches > 0 ? -branches : r.at("rounds").get<int64_t>());
    }
    std::vector<sim::TargetSample> verifies;
    for (const nlohmann::json& r : m["runs"])
      if (r.contains("target_forward_s"))
        verifies.push_back({r.at("verified_rows").get<double>(), r.at("sequences").get<double>(),
                            context + 0.5 * tokens, r.at("target_forward_s").get<double>()});
    // The speed probes around the drafter's runs (profiles from before them: none, s = 1),
    // against the refitted target.
    std::optional<sim::ModelShape> target;
    if (!model.empty()) target = sim::load_model_shape(model);
    const double s =
        target && m.contains("probe")
            ? sim::probe_scale(*target, profile,
                               sim::probe_samples(m["probe"], where + ".probe"))
            : 1.0;
    const sim::DrafterCalibration cal =
        fit_at_profile_speed(m["spec"].get<std::string>(), sd, profile, s, samples, kb, rounds,
                             target ? &*target : nullptr, verifies);
    sim::DrafterFit fit = cal.fit;
    if (!target) {  // no model to price the verifications with: keep the stored extras
      const sim::DrafterFit* old = profile.drafter_fit(sd.shape.name);
      fit.target_switch_s = old ? old->target_switch_s : 0;
      fit.target_seq_s = old ? old->target_seq_s : 0;
    }
    profile.drafter_fits[sd.shape.name] = fit;
  }
  nlohmann::json o = profile.to_json();
  for (const char* key : {"measurements", "fit", "drafter_measurements"})
    if (j.contains(key)) o[key] = j[key];
  std::ofstream w(out.string());
  SSD_CHECK(w.good(), "cannot write '{}'", out.string());
  w << o.dump(2) << '\n';
  fmt::print("written to {}\n", out.string());
  return 0;
}

int run_calibrate(const CalibrateOptions& o) {
  SSD_CHECK(!o.model.empty(), "--calibrate needs --calibrate-model or $SSD_MODEL");
  SSD_CHECK(!o.out.empty(), "--calibrate needs --out PATH for the profile JSON");
  for (const std::string& d : o.drafters) sim_drafter_for_spec(d);  // bad specs fail first
  const ModelFile file = ModelFile::open(o.model);
  Stat bw;
  {
    kernels::ThreadPool pool(kernels::ThreadPool::Options{o.threads, {}, 200});
    bw = measure_read_bandwidth(pool, int64_t{256} << 20, 5);
  }
  // Cache room for the largest block, and for a decode batch's sequences, each with its own
  // cached context (16 tokens of slack each).
  const int32_t max_batch = *std::max_element(o.batches.begin(), o.batches.end());
  ForwardTimer timer(file, make_cpu_backend(CpuBackendOptions{o.threads, {}, 200}), o.context,
                     std::max(o.rows, (o.context + 32) * max_batch), 1);
  sim::ModelShape shape = sim::load_model_shape(o.model);
  std::vector<sim::ForwardSample> samples;
  std::vector<Stat> stats;
  // Every size to 8 rows, then every 4th: a batch-4 verification at k = 7 is 32 rows.
  std::vector<int32_t> sizes;
  for (int32_t n = 1; n <= o.rows; n += n < 8 ? 1 : 4) sizes.push_back(n);
  if (sizes.back() != o.rows) sizes.push_back(o.rows);
  for (int32_t n : sizes) {
    const Stat s = timer.block_seconds(n, true, 4, 5);
    stats.push_back(s);
    samples.push_back({static_cast<double>(n), static_cast<double>(o.context), s.median});
  }
  // Decode batches (one row of each of n sequences): the cost per sequence (cpu_calibration.h).
  // Each sequence has its own cached context, as in a real batch: forks of one cache share the
  // prefix's pages, and on this VM (1 thread, batch 4, 128 cached tokens, alternated under load)
  // such a batch took 4.1-4.6 ms where one with its own caches took 5.0-6.2 ms; a 2-rank AR
  // step at batch 4 was priced ~12% too fast from the shared one.
  for (int32_t n : o.batches) {
    if (n < 2) continue;
    const Stat s = timer.decode_batch_seconds(n, 4, 5, true);
    stats.push_back(s);
    samples.push_back({static_cast<double>(n), static_cast<double>(o.context), s.median,
                       static_cast<double>(n)});
  }
  // The attention per cached position (cpu_calibration.h, fit_kv_slopes): the probe's shapes
  // again at a quarter of the context (the cache's attention is 40% of a 4-sequence decode batch
  // at 128 cached tokens on this VM).
  if (o.context >= 8) {
    const int64_t short_ctx = o.context / 4;
    ForwardTimer near(file, make_cpu_backend(CpuBackendOptions{o.threads, {}, 200}), short_ctx,
                      std::max<int64_t>(12, (short_ctx + 32) * max_batch), 1);
    auto at_short = [&](double rows, double seqs, const Stat& s) {
      stats.push_back(s);
      samples.push_back({rows, static_cast<double>(short_ctx), s.median, seqs});
    };
    at_short(1, 1, near.block_seconds(1, true, 4, 5));
    at_short(12, 1, near.block_seconds(12, true, 4, 5));
    if (max_batch > 1)
      at_short(max_batch, max_batch, near.decode_batch_seconds(max_batch, 4, 5, true));
  }
  const std::string name = fmt::format("cpu-{}t-calibrated", o.threads);
  sim::Calibration cal = sim::fit_device(name, shape, bw.median * 1e9, samples);
  cal.profile.source = fmt::format("ssd simulate --calibrate on {} ({} threads, {}), model {}",
                                   build_description(), o.threads,
                                   fmt::format("read bandwidth {:.2f} GB/s", bw.median), o.model);
  nlohmann::json meas = nlohmann::json::array();
  fmt::print("| rows | measured ms (min..max) | fitted ms | error |\n|---|---|---|---|\n");
  for (size_t i = 0; i < samples.size(); ++i) {
    meas.push_back({{"rows", samples[i].rows},
                    {"seqs", samples[i].seqs},
                    {"context", samples[i].context},
                    {"median_s", stats[i].median},
                    {"min_s", stats[i].min},
                    {"max_s", stats[i].max},
                    {"fitted_s", cal.predicted_s[i]}});
    fmt::print("| {}{} | {:.2f} ({:.2f}..{:.2f}) | {:.2f} | {:+.1f}% |\n", samples[i].rows,
               samples[i].seqs > 1 ? " (one per sequence)" : "",
               stats[i].median * 1e3, stats[i].min * 1e3, stats[i].max * 1e3,
               cal.predicted_s[i] * 1e3,
               100 * (cal.predicted_s[i] - samples[i].seconds) / samples[i].seconds);
  }
  // The achieved read rate can exceed the streamed bandwidth (cpu_calibration.h).
  const double reads_Bps = cal.profile.mem_bw_Bps * cal.profile.mem_efficiency;
  fmt::print("\nprofile {}: forwards read at {:.2f} GB/s ({:.2f} x the {:.2f} GB/s measured by "
             "streaming), overhead {:.3f} ms "
             "per forward of {} layers + {:.3f} ms per sequence, effective peak {:.1f} GFLOP/s, "
             "attention {:.2f} us per cached position of each sequence + {:.2f} us of each row; "
             "fit error median {:.1f}%, worst {:.1f}%\n",
             name, reads_Bps / 1e9, reads_Bps / bw.median / 1e9, bw.median,
             cal.profile.layer_overhead_s * static_cast<double>(shape.n_layers) * 1e3,
             shape.n_layers,
             cal.profile.seq_layer_overhead_s * static_cast<double>(shape.n_layers) * 1e3,
             cal.profile.peak_flops.at("bf16") / 1e9,
             cal.profile.kv_seq_pos_layer_s * static_cast<double>(shape.n_layers) * 1e6,
             cal.profile.kv_row_pos_layer_s * static_cast<double>(shape.n_layers) * 1e6,
             100 * cal.median_rel_err, 100 * cal.max_rel_err);
  nlohmann::json drafters;
  if (!o.drafters.empty()) drafters = calibrate_drafters(o, cal.profile);
  nlohmann::json j = cal.profile.to_json();
  j["measurements"] = meas;
  j["fit"] = {{"median_rel_err", cal.median_rel_err}, {"max_rel_err", cal.max_rel_err}};
  if (!drafters.is_null()) j["drafter_measurements"] = drafters;
  std::ofstream out(o.out.string());
  SSD_CHECK(out.good(), "cannot write '{}'", o.out.string());
  out << j.dump(2) << '\n';
  fmt::print("written to {}\n", o.out.string());
  return 0;
}

int run_probe(const CalibrateOptions& o) {
  SSD_CHECK(!o.model.empty(), "--probe needs --calibrate-model or $SSD_MODEL");
  SSD_CHECK(!o.out.empty(), "--probe needs --out PATH for the probe JSON");
  const nlohmann::json samples = probe_json(o, ModelFile::open(o.model));
  std::ofstream out(o.out.string());
  SSD_CHECK(out.good(), "cannot write '{}'", o.out.string());
  out << nlohmann::json{{"kind", "speed_probe"}, {"threads", o.threads}, {"model", o.model},
                        {"samples", samples}}
             .dump(2)
      << '\n';
  return 0;
}

}  // namespace ssd
