#include "actors/frontend/bench_command.h"

#include <fmt/format.h>

#include <fstream>
#include <sstream>
#include <thread>

#include "actors/frontend/build_info.h"
#include "actors/frontend/drafter_factory.h"
#include "actors/frontend/flags.h"
#include "actors/frontend/model_session.h"
#include "actors/frontend/run_report.h"
#include "runtime/core/error.h"
#include "runtime/tokenizer/chat_template.h"

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
  bool online_learning = false;
  std::string domino_head = "on";
  std::optional<std::filesystem::path> out_json;
  std::optional<std::filesystem::path> out_md;

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
    v(online_learning, "online-learning", "early-exit drafter: train its head online (DVI)");
    v(domino_head, "domino-head", "domino drafter: on or off", {.choices = {"on", "off"}});
    v(out_json, "out-json", "write all runs and the summary as JSON here");
    v(out_md, "out-md", "write the summary table as markdown here");
  }
};

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, sep);)
    if (!item.empty()) out.push_back(item);
  return out;
}

std::vector<std::string> read_prompts(const std::filesystem::path& p, int32_t max) {
  std::ifstream in(p);
  SSD_CHECK(in.good(), "--prompt-file: cannot read '{}'", p.string());
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::string text;
    for (size_t i = 0; i < line.size(); ++i) {
      if (line[i] == '\\' && i + 1 < line.size() && line[i + 1] == 'n') {
        text += '\n';
        ++i;
      } else {
        text += line[i];
      }
    }
    out.push_back(text);
    if (max > 0 && static_cast<int32_t>(out.size()) == max) break;
  }
  SSD_CHECK(!out.empty(), "--prompt-file '{}' has no prompts", p.string());
  return out;
}

// Aggregate over the prompts of one configuration.
struct Row {
  std::string mode, drafter;
  int32_t k = 0;
  int64_t tokens = 0, after_first = 0, rounds = 0, accepted = 0;
  double decode_s = 0, draft_s = 0, verify_s = 0;
  int exact = 0, compared = 0;
  double tps() const { return decode_s > 0 ? after_first / decode_s : 0; }
  double mal() const { return mode == "ar" ? 1.0 : rounds ? 1.0 + double(accepted) / rounds : 0; }
};

}  // namespace

int run_bench_command(int argc, const char* const* argv) {
  BenchArgs args;
  if (parse(argc, argv, args).help) {
    fmt::print("{}", help_text(BenchArgs{}, "ssd bench",
                               "Compare AR with SD for several drafters and draft lengths."));
    return 0;
  }
  const auto prompts = read_prompts(args.prompt_file, args.max_prompts);
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

  ModelSession session(SessionOptions{args.model.string(), args.threads, 0});
  const Tokenizer& tok = session.tokenizer();
  fmt::print(stderr, "model: {}\n{}\n", session.file().summary(), build_description());
  DrafterOptions dopts;
  dopts.online_learning = args.online_learning;
  dopts.domino_head = args.domino_head == "on";
  dopts.threads = args.threads;
  // Build every drafter before running anything: a bad spec fails before minutes of work.
  std::vector<std::unique_ptr<Drafter>> drafters;
  for (const auto& s : specs) drafters.push_back(make_drafter(s, session, dopts));

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
  for (size_t pi = 0; pi < prompts.size(); ++pi) {
    GenerationRequest req;
    if (tmpl) {
      const ChatMessage m{"user", prompts[pi]};
      req.prompt = tok.encode(tmpl->render({&m, 1}, true), true, true);
    } else {
      req.prompt = tok.encode(prompts[pi], true, true);
    }
    req.max_new_tokens = args.n_predict;
    req.sampler = SamplerConfig{args.temp, 0, 1.0f, 0.0f, args.seed};
    req.stream = pi;
    req.stop_ids = stop_ids;
    auto account = [&](const RunReport& r, const std::vector<int32_t>& ar_ids) {
      Row& row = row_for(r.mode, r.drafter, r.k);
      row.tokens += static_cast<int64_t>(r.gen.tokens.size());
      row.after_first += std::max<int64_t>(0, static_cast<int64_t>(r.gen.tokens.size()) - 1);
      row.decode_s += r.gen.decode_s;
      row.rounds += r.sd.rounds;
      row.accepted += r.sd.accepted;
      row.draft_s += r.sd.draft_s;
      row.verify_s += r.sd.verify_s;
      if (r.mode == "sd" && is_greedy(req.sampler)) {
        row.compared++;
        if (r.gen.tokens == ar_ids) {
          row.exact++;
        } else {
          all_exact = false;
          fmt::print(stderr, "MISMATCH: prompt {} with {} k={} differs from AR\n", pi, r.drafter, r.k);
        }
      }
      nlohmann::json j = r.to_json();
      j["prompt_index"] = pi;
      runs.push_back(j);
    };
    const RunReport ar = run_request(session.model(), session.kv(), nullptr, req, {});
    account(ar, ar.gen.tokens);
    for (auto& d : drafters)
      for (int32_t k : ks)
        account(run_request(session.model(), session.kv(), d.get(), req, SdOptions{k, args.width}),
                ar.gen.tokens);
    fmt::print(stderr, "prompt {}/{} done\n", pi + 1, prompts.size());
  }

  const double ar_tps = rows.front().tps();
  std::string md = fmt::format(
      "| mode | drafter | k | mean acceptance length | decode tok/s | vs AR | draft s | verify s | "
      "greedy == AR |\n|---|---|---|---|---|---|---|---|---|\n");
  for (const auto& r : rows)
    md += fmt::format("| {} | {} | {} | {:.2f} | {:.1f} | {:.2f}x | {:.2f} | {:.2f} | {} |\n", r.mode,
                      r.mode == "ar" ? "-" : r.drafter, r.mode == "ar" ? "-" : std::to_string(r.k),
                      r.mal(), r.tps(), ar_tps > 0 ? r.tps() / ar_tps : 0, r.draft_s, r.verify_s,
                      r.mode == "ar" || r.compared == 0 ? std::string("-")
                                                        : fmt::format("{}/{}", r.exact, r.compared));
  const std::string context = fmt::format(
      "{} prompts x {} tokens, temperature {}, {} threads | {} | {}", prompts.size(),
      args.n_predict, args.temp, args.threads, session.file().summary(), build_description());
  fmt::print("{}\n{}", context, md);
  if (args.out_md) std::ofstream(*args.out_md) << context << "\n\n" << md;
  if (args.out_json) {
    nlohmann::json j;
    j["context"] = context;
    j["commit"] = build_commit();
    j["config"] = resolved_json(args);
    j["runs"] = runs;
    nlohmann::json summary = nlohmann::json::array();
    for (const auto& r : rows)
      summary.push_back({{"mode", r.mode}, {"drafter", r.drafter}, {"k", r.k},
                         {"mean_acceptance_length", r.mal()}, {"decode_tokens_per_s", r.tps()},
                         {"speedup_vs_ar", ar_tps > 0 ? r.tps() / ar_tps : 0},
                         {"draft_time_s", r.draft_s}, {"verify_time_s", r.verify_s},
                         {"greedy_exact", r.exact}, {"greedy_compared", r.compared}});
    j["summary"] = summary;
    std::ofstream(*args.out_json) << j.dump(2) << "\n";
  }
  SSD_CHECK(all_exact, "greedy SD output differed from AR (see MISMATCH lines): a bug");
  return 0;
}

}  // namespace ssd
