#include "launch/cli/bench_kernels_command.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <cmath>
#include <optional>
#include <sstream>
#include <thread>

#include "kernels/cpu/rowops.h"
#include "kernels/cpu/thread_pool.h"
#include "launch/cli/bench_kernels_measure.h"
#include "launch/cli/build_info.h"
#include "launch/cli/flags.h"
#include "runtime/backend/cpu/cpu_backend.h"
#include "runtime/core/error.h"
#include "runtime/core/huge_page_arena.h"
#include "topology/topology.h"

namespace ssd {
namespace {

std::string default_threads_list() {
  const unsigned n = std::max(1u, std::thread::hardware_concurrency());
  return n == 1 ? "1" : fmt::format("1,{}", n);
}

struct BenchKernelsArgs {
  std::filesystem::path model;
  std::string threads_list = default_threads_list();
  std::string blocks = "2,4,8,16";
  int64_t context = 128;
  int64_t prefill = 512;
  int32_t repeats = 5;
  int32_t calls = 8;
  int32_t prefill_repeats = 3;
  int64_t bw_mib = 256;
  bool pin = false;
  int32_t spin_us = 200;
  int32_t decode_runs = 10;
  int64_t decode_run_tokens = 256;
  std::optional<std::filesystem::path> json;
  std::optional<std::filesystem::path> markdown;

  template <class V>
  void visit(V&& v) {
    v(model, "model", "GGUF file or safetensors checkpoint directory",
      {.required = true, .short_name = 'm', .must_exist = true});
    v(threads_list, "threads-list", "comma-separated thread counts to measure at");
    v(blocks, "blocks", "comma-separated block sizes n for the verify cost ratio");
    v(context, "context", "cached tokens before each decode / verify forward", {.min = 0});
    v(prefill, "prefill", "prompt length for prefill tok/s", {.min = 1});
    v(repeats, "repeats", "samples per figure (median and min..max are reported)",
      {.min = 1, .max = 1000});
    v(calls, "calls", "forwards averaged in one decode / verify sample", {.min = 1, .max = 10000});
    v(prefill_repeats, "prefill-repeats", "samples of the prefill figure", {.min = 1, .max = 100});
    v(bw_mib, "bw-mib", "buffer of the bandwidth measurement, MiB (>> the last-level cache)",
      {.min = 1, .max = 1 << 16});
    v(pin, "pin", "pin each pool thread to one CPU of this process's binding");
    v(spin_us, "spin-us", "thread pool idle spin before sleeping, microseconds",
      {.min = 0, .max = 1000000});
    v(decode_runs, "decode-runs",
      "consecutive decode runs for the run-to-run variation (coefficient of variation); 0 = skip",
      {.min = 0, .max = 1000});
    v(decode_run_tokens, "decode-run-tokens", "tokens decoded in each of those runs",
      {.min = 1, .max = 4096});
    v(json, "json", "write every figure as JSON here");
    v(markdown, "markdown", "write the table as markdown here");
  }
};

std::vector<int64_t> int_list(const std::string& flag, const std::string& s, int64_t lo,
                              int64_t hi) {
  std::vector<int64_t> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');) {
    if (item.empty()) continue;
    size_t used = 0;
    int64_t v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (...) {
      used = 0;
    }
    SSD_CHECK(used == item.size(), "--{}: '{}' is not an integer", flag, item);
    SSD_CHECK(v >= lo && v <= hi, "--{}: {} must be between {} and {}", flag, v, lo, hi);
    out.push_back(v);
  }
  SSD_CHECK(!out.empty(), "--{}: empty list", flag);
  return out;
}

std::vector<std::string> cpu_flags() {
  __builtin_cpu_init();
  std::vector<std::string> f;
  if (__builtin_cpu_supports("sse4.2")) f.push_back("sse4.2");
  if (__builtin_cpu_supports("avx")) f.push_back("avx");
  if (__builtin_cpu_supports("avx2")) f.push_back("avx2");
  if (__builtin_cpu_supports("fma")) f.push_back("fma");
  if (__builtin_cpu_supports("f16c")) f.push_back("f16c");
  if (__builtin_cpu_supports("avx512f")) f.push_back("avx512f");
  if (__builtin_cpu_supports("avx512bw")) f.push_back("avx512bw");
  if (__builtin_cpu_supports("avx512vl")) f.push_back("avx512vl");
  if (__builtin_cpu_supports("avx512dq")) f.push_back("avx512dq");
  if (__builtin_cpu_supports("avx512vnni")) f.push_back("avx512vnni");
  if (__builtin_cpu_supports("avx512bf16")) f.push_back("avx512bf16");
  return f;
}

nlohmann::json stat_json(const Stat& s) {
  return {{"median", s.median}, {"min", s.min}, {"max", s.max}, {"samples", s.samples}};
}

// Consecutive decode runs of one timer: each run's figures and their spread.
struct RunSeries {
  std::vector<DecodeRun> runs;
  Stat tok_s, switches_per_s;
  double cv = 0;  // of tok/s
  std::vector<long> rounded() const {
    std::vector<long> v;
    for (const auto& r : runs) v.push_back(std::lround(r.tokens_per_s));
    return v;
  }
  nlohmann::json json() const {
    nlohmann::json j;
    j["tokens_per_s"] = nlohmann::json::array();
    j["context_switches_per_s"] = nlohmann::json::array();
    for (const auto& r : runs) {
      j["tokens_per_s"].push_back(r.tokens_per_s);
      j["context_switches_per_s"].push_back(r.context_switches_per_s);
    }
    j["tokens_per_s_stat"] = stat_json(tok_s);
    j["coefficient_of_variation"] = cv;
    return j;
  }
};

RunSeries measure_decode_runs(ForwardTimer& timer, int runs, int64_t tokens) {
  RunSeries s;
  timer.decode_run(std::min<int64_t>(tokens, 16));  // warm-up: scratch buffers grown
  std::vector<double> tps, sw;
  for (int i = 0; i < runs; ++i) {
    s.runs.push_back(timer.decode_run(tokens));
    tps.push_back(s.runs.back().tokens_per_s);
    sw.push_back(s.runs.back().context_switches_per_s);
  }
  s.tok_s = stat_of(tps);
  s.switches_per_s = stat_of(sw);
  s.cv = coefficient_of_variation(tps);
  return s;
}

// One line of the report.
struct Figure {
  std::string what;
  int threads = 0;
  Stat stat;
  std::string unit;
  std::string target;  // "" = no target
  std::optional<bool> pass;
};

std::string fmt_num(double v) {
  if (v == 0) return "0";
  if (v >= 100) return fmt::format("{:.0f}", v);
  if (v >= 10) return fmt::format("{:.1f}", v);
  if (v >= 1) return fmt::format("{:.2f}", v);
  return fmt::format("{:.3f}", v);
}

std::string markdown_table(const std::vector<Figure>& figs) {
  std::string md =
      "| figure | threads | median | min .. max | unit | target | met |\n"
      "| --- | ---: | ---: | ---: | --- | --- | --- |\n";
  for (const auto& f : figs)
    md += fmt::format("| {} | {} | {} | {} .. {} | {} | {} | {} |\n", f.what, f.threads,
                      fmt_num(f.stat.median), fmt_num(f.stat.min), fmt_num(f.stat.max), f.unit,
                      f.target.empty() ? "" : f.target,
                      f.pass ? (*f.pass ? "yes" : "**no**") : "");
  return md;
}

}  // namespace

int run_bench_kernels_command(int argc, const char* const* argv) {
  BenchKernelsArgs args;
  if (parse_or_print_help(argc, argv, args, "ssd bench-kernels",
                          "Measure bandwidth, decode roofline ratio, verify cost ratio, "
                          "prefill speed and run-to-run decode variation of the CPU kernels "
                          "on a model."))
    return 0;
  const std::vector<int64_t> threads = int_list("threads-list", args.threads_list, 1, 1024);
  const std::vector<int64_t> blocks = int_list("blocks", args.blocks, 2, 256);
  const int64_t max_block = std::max(*std::max_element(blocks.begin(), blocks.end()),
                                     args.decode_runs > 0 ? args.decode_run_tokens : 0);

  const ModelFile file = ModelFile::open(args.model.string());
  const int64_t ctx_limit = file.config().context_length;
  SSD_CHECK(args.context + max_block <= ctx_limit && args.prefill <= ctx_limit,
            "--context {} + a block (or decode run) of {} (or --prefill {}) exceeds the model's "
            "context of {} positions",
            args.context, max_block, args.prefill, ctx_limit);
  const WeightBytes wb = weight_bytes_per_token(file);
  const CpuTopology topo = discover_topology();
  const std::vector<std::string> flags = cpu_flags();
  fmt::print(stderr, "model: {}\n{}\ntopology: {}\ncpu flags: {}\n", file.summary(),
             build_description(), topo.summary(), fmt::join(flags, " "));
  fmt::print(stderr, "weights read per token: {:.2f} MB ({} layer matrices + LM head)\n",
             static_cast<double>(wb.total) / 1e6, wb.main_type);
  const std::string thp = thp_mode();
  fmt::print(stderr, "transparent huge pages: {}{}\n", thp.empty() ? "not in this kernel" : thp,
             thp == "always" || thp == "madvise"
                 ? " (the weights and K/V ask for them)"
                 : ": the weights and K/V use 4 KiB pages; decode was 13% slower so on the "
                   "Xeon host (docs/performance.md, \"Weights and K/V in huge pages\")");

  std::vector<Figure> figs;
  nlohmann::json per_threads = nlohmann::json::array();
  for (int64_t t : threads) {
    const int nt = static_cast<int>(t);
    std::vector<int> pin;
    if (args.pin) pin = topo.bound_cpus;
    nlohmann::json jt;
    jt["threads"] = nt;

    Stat bw, handoff;
    {
      kernels::ThreadPool pool(kernels::ThreadPool::Options{nt, pin, args.spin_us});
      bw = measure_read_bandwidth(pool, args.bw_mib << 20, std::max(5, args.repeats));
      handoff = measure_handoff_us(pool, 2000, args.repeats);
    }
    fmt::print(stderr, "[{} threads] read bandwidth {:.1f} GB/s, pool hand-off {:.2f} us\n", nt,
               bw.median, handoff.median);
    figs.push_back({"read bandwidth", nt, bw, "GB/s"});
    figs.push_back({"pool hand-off (empty parallel_for)", nt, handoff, "us"});

    ForwardTimer timer(file,
                       make_cpu_backend(CpuBackendOptions{nt, pin, args.spin_us}),
                       args.context, max_block, args.prefill);
    const Stat one = timer.block_seconds(1, true, args.calls, args.repeats);
    const Stat tok_s = {1.0 / one.median, 1.0 / one.max, 1.0 / one.min, one.samples};
    const double bytes = static_cast<double>(wb.total);
    const Stat roof = {bytes * tok_s.median / 1e9 / bw.median, bytes * tok_s.min / 1e9 / bw.median,
                       bytes * tok_s.max / 1e9 / bw.median, one.samples};
    fmt::print(stderr, "[{} threads] decode {:.1f} tok/s at {} cached tokens, roofline {:.2f}\n",
               nt, tok_s.median, args.context, roof.median);
    figs.push_back({"decode", nt, tok_s, "tok/s"});
    figs.push_back({"decode roofline ratio", nt, roof, "x", ">= 0.7", roof.median >= 0.7});

    nlohmann::json jverify = nlohmann::json::array();
    for (int64_t n : blocks) {
      const Stat s = timer.block_seconds(n, true, args.calls, args.repeats);
      const Stat ratio = {s.median / one.median, s.min / one.median, s.max / one.median, s.samples};
      std::string target;
      std::optional<bool> pass;
      if (n == 4) target = "<= 1.5", pass = ratio.median <= 1.5;
      if (n == 8) target = "<= 2.5", pass = ratio.median <= 2.5;
      fmt::print(stderr, "[{} threads] verify n={}: {:.2f} ms, ratio {:.2f}\n", nt, n,
                 s.median * 1e3, ratio.median);
      figs.push_back({fmt::format("verify cost ratio, n = {}", n), nt, ratio, "x", target, pass});
      jverify.push_back({{"n", n}, {"seconds", stat_json(s)}, {"ratio", stat_json(ratio)}});
    }

    const Stat pre = timer.prefill_seconds(args.prefill_repeats);
    const double p = static_cast<double>(args.prefill);
    const Stat pre_tok_s = {p / pre.median, p / pre.max, p / pre.min, pre.samples};
    const double vs_decode = pre_tok_s.median / tok_s.median;
    fmt::print(stderr, "[{} threads] prefill {} tokens: {:.0f} tok/s ({:.1f}x decode)\n", nt,
               args.prefill, pre_tok_s.median, vs_decode);
    figs.push_back({fmt::format("prefill ({} tokens)", args.prefill), nt, pre_tok_s, "tok/s"});
    figs.push_back({"prefill / decode", nt, Stat{vs_decode, vs_decode, vs_decode, 1}, "x",
                    ">= 10", vs_decode >= 10});

    if (args.decode_runs > 0) {
      const RunSeries runs = measure_decode_runs(timer, args.decode_runs, args.decode_run_tokens);
      fmt::print(stderr, "[{} threads] {} decode runs of {} tokens: {} tok/s, CV {:.1f}%\n", nt,
                 args.decode_runs, args.decode_run_tokens, fmt::join(runs.rounded(), ", "),
                 100 * runs.cv);
      figs.push_back({fmt::format("decode, {} runs of {} tokens", args.decode_runs,
                                  args.decode_run_tokens),
                      nt, runs.tok_s, "tok/s"});
      figs.push_back({"decode run-to-run CV", nt, Stat{100 * runs.cv, 100 * runs.cv, 100 * runs.cv,
                      args.decode_runs}, "%", "<= 10", 100 * runs.cv <= 10});
      figs.push_back({"context switches during a decode run", nt, runs.switches_per_s, "/s"});
      jt["decode_runs"] = runs.json();
    }
    jt["read_bandwidth_gbps"] = stat_json(bw);
    jt["pool_handoff_us"] = stat_json(handoff);
    jt["decode_seconds_per_token"] = stat_json(one);
    jt["decode_tokens_per_s"] = stat_json(tok_s);
    jt["roofline_ratio"] = stat_json(roof);
    jt["verify"] = jverify;
    jt["prefill_seconds"] = stat_json(pre);
    jt["prefill_tokens_per_s"] = stat_json(pre_tok_s);
    jt["prefill_vs_decode"] = vs_decode;
    per_threads.push_back(jt);
  }

  const std::string table = markdown_table(figs);
  fmt::print("{}", table);
  int met = 0, failed = 0;
  for (const auto& f : figs) {
    met += f.pass && *f.pass;
    failed += f.pass && !*f.pass;
  }
  fmt::print(stderr, "targets: {} met, {} not met (goals, not checks: exit status 0)\n", met,
             failed);

  nlohmann::json targets = nlohmann::json::array();
  for (const auto& f : figs)
    if (f.pass)
      targets.push_back({{"figure", f.what}, {"threads", f.threads}, {"value", f.stat.median},
                         {"target", f.target}, {"met", *f.pass}});
  nlohmann::json j = {
      {"command", "bench-kernels"},
      {"model", file.path()},
      {"model_summary", file.summary()},
      {"weight_type", wb.main_type},
      {"weight_bytes_per_token", wb.total},
      {"weight_bytes_matrices", wb.matrices},
      {"context", args.context},
      {"prefill_tokens", args.prefill},
      {"threads", threads},
      {"cpu_flags", flags},
      {"kernels_isa", kernels::isa_name(kernels::active_isa())},
      {"topology", topo.summary()},
      {"transparent_huge_pages", thp},
      {"commit", build_commit()},
      {"build", build_description()},
      {"flags", resolved_json(args)},
      {"results", per_threads},
      {"targets", targets},
  };
  if (args.json) {
    std::ofstream out(*args.json);
    SSD_CHECK(out.good(), "--json: cannot write '{}'", args.json->string());
    out << j.dump(2) << "\n";
  }
  if (args.markdown) {
    std::ofstream out(*args.markdown);
    SSD_CHECK(out.good(), "--markdown: cannot write '{}'", args.markdown->string());
    out << fmt::format(
        "# ssd bench-kernels\n\n- model: `{}` ({}), weights read per token {:.2f} MB\n"
        "- {}\n- cpu flags: {}\n- topology: {}\n- transparent huge pages: {}\n- context {} "
        "cached tokens, prefill {} tokens, {} samples per figure\n\n{}",
        file.path(), wb.main_type, static_cast<double>(wb.total) / 1e6, build_description(),
        fmt::join(flags, " "), topo.summary(), thp.empty() ? "none" : thp, args.context,
        args.prefill, args.repeats, table);
  }
  return 0;
}

}  // namespace ssd
