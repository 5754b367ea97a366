#include "launch/cli/distill_command.h"

#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <optional>
#include <sstream>
#include <thread>

#include "actors/roles/model_session.h"
#include "launch/cli/build_info.h"
#include "launch/cli/flags.h"
#include "runtime/core/error.h"
#include "runtime/generate/generation.h"
#include "runtime/tokenizer/chat_template.h"
#include "runtime/train/distill_dataset.h"
#include "runtime/train/distill_generate.h"
#include "runtime/train/prompt_set.h"
#include "runtime/train/train_progress.h"

namespace ssd {
namespace {

struct DistillArgs {
  std::filesystem::path model;
  std::string prompts;  // comma-separated prompt files
  std::filesystem::path out;
  std::string layers;  // empty: default_distill_layers
  int64_t n_predict = 192;
  int32_t batch = 8;
  int32_t max_prompts = 0;
  bool chat = true;
  bool force = false;
  int64_t ctx_size = 0;
  int32_t threads = static_cast<int32_t>(std::max(1u, std::thread::hardware_concurrency()));

  template <class V>
  void visit(V&& v) {
    v(model, "model", "target: GGUF file or safetensors checkpoint directory",
      {.required = true, .short_name = 'm', .must_exist = true});
    v(prompts, "prompts",
      "prompt files, comma-separated, one prompt per line ('#' comments, \\n escapes)",
      {.required = true});
    v(out, "out", "dataset file to write", {.required = true, .short_name = 'o'});
    v(layers, "layers",
      "comma-separated target layers to capture (default: 1, depth/2, depth-3)");
    v(n_predict, "n", "response budget per prompt (tokens)", {.short_name = 'n', .min = 1});
    v(batch, "batch", "prompts decoded together", {.min = 1, .max = 256});
    v(max_prompts, "max-prompts", "use only the first N prompts; 0 = all", {.min = 0});
    v(chat, "chat", "wrap each prompt in the model's chat template (as ssd generate --chat)");
    v(force, "force", "overwrite an existing output file");
    v(ctx_size, "ctx-size", "KV cache positions shared by a batch; 0 = min(model context, 4096)",
      {.min = 0});
    v(threads, "threads", "CPU worker threads", {.short_name = 't', .min = 1, .max = 1024});
  }
};

constexpr const char* kSummary =
    "Build a self-distillation dataset: the target's own greedy answers to a prompt file and its\n"
    "hidden states at the drafter's layers for every position (the input of ssd train-domino).";

std::vector<int32_t> parse_layers(const std::string& text, int64_t n_layers) {
  std::vector<int32_t> out;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');) {
    size_t used = 0;
    int64_t v = -1;
    try {
      v = std::stoll(item, &used);
    } catch (...) {
      used = 0;
    }
    SSD_CHECK(used == item.size() && !item.empty(), "--layers: '{}' is not a layer number", item);
    SSD_CHECK(v >= 0 && v < n_layers, "--layers: layer {} is outside the model (layers 0..{})", v,
              n_layers - 1);
    SSD_CHECK(std::find(out.begin(), out.end(), v) == out.end(), "--layers: layer {} given twice",
              v);
    out.push_back(static_cast<int32_t>(v));
  }
  SSD_CHECK(!out.empty(), "--layers: no layer given");
  return out;
}

int run_distill(const DistillArgs& args) {
  const std::string out = args.out.string();
  std::error_code ec;
  SSD_CHECK(args.force || !std::filesystem::exists(args.out, ec),
            "--out '{}' exists; pass --force to overwrite it", out);
  const std::vector<std::string> texts = read_prompt_files(args.prompts, args.max_prompts);

  ModelSession session(SessionOptions{args.model.string(), args.threads, args.ctx_size});
  const ModelConfig& cfg = session.file().config();
  const std::vector<int32_t> layers = args.layers.empty()
                                          ? default_distill_layers(cfg.n_layers)
                                          : parse_layers(args.layers, cfg.n_layers);
  const Tokenizer& tok = session.tokenizer();
  const std::optional<ChatTemplate> tmpl =
      args.chat ? std::optional<ChatTemplate>(ChatTemplate::from_spec(tok.spec())) : std::nullopt;
  std::vector<std::vector<int32_t>> prompts;
  for (const std::string& t : texts) {
    if (tmpl) {
      const ChatMessage m{"user", t};
      prompts.push_back(tok.encode(tmpl->render({&m, 1}, /*add_generation_prompt=*/true), true,
                                   true));
    } else {
      prompts.push_back(tok.encode(t, /*add_bos=*/true, /*parse_special=*/true));
    }
  }

  fmt::print(stderr, "model: {}\n{}\n", session.file().summary(), build_description());
  std::string layer_list;
  for (int32_t l : layers) layer_list += fmt::format("{}{}", layer_list.empty() ? "" : ",", l);
  fmt::print(stderr,
             "distill: {} prompts from {} | layers {} (features {} x f16 per token) | -n {} | "
             "batch {} | {} threads | chat {}\n",
             prompts.size(), args.prompts, layer_list,
             static_cast<int64_t>(layers.size()) * cfg.dim, args.n_predict, args.batch,
             args.threads, args.chat ? "on" : "off");

  if (args.out.has_parent_path()) std::filesystem::create_directories(args.out.parent_path(), ec);
  LocalTarget target(session.model(), session.kv());
  DistillOptions opts;
  opts.layers = layers;
  opts.max_new_tokens = args.n_predict;
  opts.batch = args.batch;
  opts.stop_ids = tok.spec().eog_ids;
  DistillWriter writer(out, layers, cfg.dim, cfg.vocab, model_file_digest(args.model.string()));

  train::StatusLine status(stderr);
  auto progress = [&](const DistillProgress& p) {
    const double tps =
        p.seconds > 0 ? static_cast<double>(p.prompt_tokens + p.response_tokens) / p.seconds : 0;
    const double gen_tps =
        p.generate_s > 0 ? static_cast<double>(p.response_tokens) / p.generate_s : 0;
    const auto left = train::time_left(p.seconds, static_cast<int64_t>(p.done),
                                       static_cast<int64_t>(p.total));
    status.show(fmt::format("distill: {}/{} sequences | {:.0f} tok/s stored ({:.1f} response "
                            "tok/s decoding) | {} elapsed, ~{} left",
                            p.done, p.total, tps, gen_tps, train::format_duration(p.seconds),
                            train::format_duration(left)));
  };
  const DistillProgress p = distill_prompts(target, prompts, opts, writer, progress);
  status.finish();
  writer.finish();

  const uint64_t bytes = std::filesystem::file_size(args.out);
  fmt::print(stderr,
             "distill: wrote {} | {} sequences | {} prompt + {} response tokens | {:.1f} MB | "
             "wall {} (decoding {}, feature capture {})\n",
             out, p.done, p.prompt_tokens, p.response_tokens, static_cast<double>(bytes) / 1e6,
             train::format_duration(p.seconds), train::format_duration(p.generate_s),
             train::format_duration(p.capture_s));
  return 0;
}

}  // namespace

int run_distill_command(int argc, const char* const* argv) {
  DistillArgs args;
  if (parse_or_print_help(argc, argv, args, "ssd distill", kSummary)) return 0;
  return run_distill(args);
}

}  // namespace ssd
