// Target forwards are timed with ForwardTimer (the code `ssd bench-kernels` uses); drafters run
// the runtime's own SD loop (generate_sd_batch) on the target, so a round's drafting includes
// what a real round pays around the forwards: the commit of the outcome, Domino's GRU head and
// features, sampling. One warm-up run per drafter precedes its measured runs.
#include "launch/cli/sim_calibrate.h"

#include <fmt/format.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "actors/roles/drafter_factory.h"
#include "actors/roles/model_session.h"
#include "kernels/cpu/thread_pool.h"
#include "launch/cli/bench_kernels_measure.h"
#include "launch/cli/build_info.h"
#include "runtime/backend/cpu/cpu_backend.h"
#include "runtime/core/error.h"
#include "runtime/spec/sd_generation.h"
#include "topology/sim/cpu_calibration.h"
#include "topology/sim/drafter_calibration.h"

namespace ssd {
namespace {

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

struct DrafterRun {
  int32_t k = 0, batch = 0;
  int64_t forwards = 0;
  sim::DraftSample sample;
};

// Times `spec` in SD rounds at every (k, batch); adds the verifier's host cost of each run to
// `host` as (rows per forward, seconds per forward).
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
  for (int32_t k : o.ks)
    for (int32_t b : o.batches) {
      const SdBatchResult r = run(k, b);
      const SdStats& s = r.stats;
      SSD_CHECK(s.forwards > 0, "calibration: the {} run at k {} batch {} made no round", spec, k,
                b);
      const double fw = static_cast<double>(s.forwards);
      DrafterRun d{k, b, s.forwards, {}};
      d.sample.n = static_cast<double>(s.rounds) / fw;
      d.sample.suffix = s.mean_acceptance_length();
      d.sample.k = k;
      d.sample.context = o.context + 0.5 * o.tokens;
      d.sample.seconds = std::max(1e-9, (s.draft_s - r.drafter_start_s) / fw);
      out.push_back(d);
      host.emplace_back(static_cast<double>(s.verified_rows) / fw,
                        std::max(0.0, s.verify_s - s.target_forward_s) / fw);
    }
  return out;
}

nlohmann::json calibrate_drafters(const CalibrateOptions& o, sim::DeviceProfile& profile) {
  SessionOptions so;
  so.model_path = o.model;
  so.threads = o.threads;
  ModelSession session(so);
  std::vector<std::pair<double, double>> host;
  nlohmann::json meas = nlohmann::json::object();
  for (const std::string& spec : o.drafters) {
    const sim::SimDrafter sd = sim_drafter_for_spec(spec);
    const std::vector<DrafterRun> runs = time_drafter(o, session, spec, host);
    std::vector<sim::DraftSample> samples;
    for (const DrafterRun& r : runs) samples.push_back(r.sample);
    const sim::DrafterCalibration cal = sim::fit_drafter(sd, profile, samples);
    profile.drafter_fits[sd.shape.name] = cal.fit;
    fmt::print("\ndrafter {} (simulated as --drafter {}): one SD round's drafting\n\n"
               "| k | batch | rounds | measured ms | fitted ms | error |\n|---|---|---|---|---|---|\n",
               spec, sd.shape.name);
    nlohmann::json rows = nlohmann::json::array();
    for (size_t i = 0; i < runs.size(); ++i) {
      const double m = runs[i].sample.seconds, p = cal.predicted_s[i];
      fmt::print("| {} | {} | {} | {:.3f} | {:.3f} | {:+.1f}% |\n", runs[i].k, runs[i].batch,
                 runs[i].forwards, m * 1e3, p * 1e3, 100 * (p - m) / m);
      rows.push_back({{"k", runs[i].k}, {"batch", runs[i].batch}, {"rounds", runs[i].forwards},
                      {"sequences", runs[i].sample.n}, {"suffix", runs[i].sample.suffix},
                      {"median_s", m}, {"fitted_s", p}});
    }
    const sim::DrafterFit& f = cal.fit;
    fmt::print("\nfit: {:.2f} of the bandwidth, {:.1f} GFLOP/s, {:.3f} ms per forward, {:.3f} ms "
               "per call, {:.1f} us per lookup; error median {:.1f}%, worst {:.1f}%\n",
               f.mem_efficiency, f.peak_flops / 1e9, f.forward_s * 1e3, f.call_s * 1e3,
               f.lookup_s * 1e6, 100 * f.median_rel_err, 100 * f.max_rel_err);
    meas[sd.shape.name] = {{"spec", spec}, {"runs", rows}};
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
  ForwardTimer timer(file, make_cpu_backend(CpuBackendOptions{o.threads, {}, 200}), o.context,
                     o.rows, 1);
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
  const std::string name = fmt::format("cpu-{}t-calibrated", o.threads);
  sim::Calibration cal = sim::fit_device(name, shape, bw.median * 1e9, samples);
  cal.profile.source = fmt::format("ssd simulate --calibrate on {} ({} threads, {}), model {}",
                                   build_description(), o.threads,
                                   fmt::format("read bandwidth {:.2f} GB/s", bw.median), o.model);
  nlohmann::json meas = nlohmann::json::array();
  fmt::print("| rows | measured ms (min..max) | fitted ms | error |\n|---|---|---|---|\n");
  for (size_t i = 0; i < samples.size(); ++i) {
    meas.push_back({{"rows", samples[i].rows},
                    {"context", samples[i].context},
                    {"median_s", stats[i].median},
                    {"min_s", stats[i].min},
                    {"max_s", stats[i].max},
                    {"fitted_s", cal.predicted_s[i]}});
    fmt::print("| {} | {:.2f} ({:.2f}..{:.2f}) | {:.2f} | {:+.1f}% |\n", samples[i].rows,
               stats[i].median * 1e3, stats[i].min * 1e3, stats[i].max * 1e3,
               cal.predicted_s[i] * 1e3,
               100 * (cal.predicted_s[i] - samples[i].seconds) / samples[i].seconds);
  }
  fmt::print("\nprofile {}: bandwidth {:.2f} GB/s measured x {:.2f} achieved, overhead {:.3f} ms "
             "per forward of {} layers, effective peak {:.1f} GFLOP/s; fit error median {:.1f}%, "
             "worst {:.1f}%\n",
             name, bw.median, cal.profile.mem_efficiency,
             cal.profile.layer_overhead_s * static_cast<double>(shape.n_layers) * 1e3,
             shape.n_layers, cal.profile.peak_flops.at("bf16") / 1e9, 100 * cal.median_rel_err,
             100 * cal.max_rel_err);
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

}  // namespace ssd
