// `ssd synth-prompts` (see synth_prompts_command.h): flags -> PromptSynthOptions, progress on
// stderr, the prompt file written at the end (nothing is written when a check fails).
#include "launch/cli/synth_prompts_command.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "actors/roles/model_session.h"
#include "launch/cli/build_info.h"
#include "launch/cli/flags.h"
#include "runtime/core/error.h"
#include "runtime/generate/generation.h"
#include "runtime/tokenizer/chat_template.h"
#include "runtime/train/prompt_set.h"
#include "runtime/train/prompt_synth.h"
#include "runtime/train/train_progress.h"

namespace ssd {
namespace {

struct SynthArgs {
  std::filesystem::path model;
  std::filesystem::path out;
  int64_t count = 1000;
  int32_t batch = 32;
  int64_t max_tokens = 96;
  int32_t min_words = 3;
  double temp = 1.0;
  double top_p = 0.95;
  uint64_t seed = 1;
  std::string exclude;  // comma-separated prompt files
  bool force = false;
  int64_t ctx_size = 0;
  int32_t threads = static_cast<int32_t>(std::max(1u, std::thread::hardware_concurrency()));

  template <class V>
  void visit(V&& v) {
    v(model, "model", "target: GGUF file or safetensors checkpoint directory",
      {.required = true, .short_name = 'm', .must_exist = true});
    v(out, "out", "prompt file to write", {.required = true, .short_name = 'o'});
    v(count, "count", "prompts to write", {.min = 1});
    v(batch, "batch", "user turns sampled together", {.min = 1, .max = 256});
    v(max_tokens, "max-tokens", "token budget of one user turn (longer turns are dropped)",
      {.min = 1});
    v(min_words, "min-words", "drop turns with fewer words", {.min = 1});
    v(temp, "temp", "sampling temperature", {.min = 1e-3, .max = 10});
    v(top_p, "top-p", "nucleus sampling mass", {.min = 1e-3, .max = 1});
    v(seed, "seed", "sampling seed: the same seed and flags give the same file");
    v(exclude, "exclude",
      "comma-separated prompt files whose prompts must not be produced (e.g. a held-out split)");
    v(force, "force", "overwrite an existing output file");
    v(ctx_size, "ctx-size", "KV cache positions shared by a batch; 0 = min(model context, 4096)",
      {.min = 0});
    v(threads, "threads", "CPU worker threads", {.short_name = 't', .min = 1, .max = 1024});
  }
};

constexpr const char* kSummary =
    "Write a prompt file of user requests sampled from the target itself (Magpie-style: its chat\n"
    "template up to the opening of a user turn, continued by sampling), for `ssd distill`.";

int run_synth(const SynthArgs& a) {
  std::error_code ec;
  SSD_CHECK(a.force || !std::filesystem::exists(a.out, ec),
            "--out '{}' exists; pass --force to overwrite it", a.out.string());
  const std::vector<std::string> exclude =
      a.exclude.empty() ? std::vector<std::string>{} : read_prompt_files(a.exclude);

  ModelSession session(SessionOptions{a.model.string(), a.threads, a.ctx_size});
  const Tokenizer& tok = session.tokenizer();
  const ChatTemplate tmpl = ChatTemplate::from_spec(tok.spec());
  const std::string opening_text = user_turn_opening(tmpl);
  const std::vector<int32_t> opening = tok.encode(opening_text, /*add_bos=*/true,
                                                  /*parse_special=*/true);
  PromptSynthOptions o;
  o.count = a.count;
  o.batch = a.batch;
  o.max_tokens = a.max_tokens;
  o.min_words = a.min_words;
  o.sampler.temperature = static_cast<float>(a.temp);
  o.sampler.top_p = static_cast<float>(a.top_p);
  o.sampler.seed = a.seed;
  o.stop_ids = tok.spec().eog_ids;
  o.exclude = exclude;

  LocalTarget target(session.model(), session.kv());
  {
    // Checked here so that the message names this command's flags.
    GenerationRequest r;
    r.prompt = opening;
    r.max_new_tokens = a.max_tokens;
    const std::vector<GenerationRequest> batch(static_cast<size_t>(a.batch), r);
    try {
      check_batch_context(target, batch);
    } catch (const Error&) {
      SSD_CHECK(false,
                "--batch {} turns of {} + --max-tokens {} positions do not fit the KV cache of {} "
                "positions; lower --batch or --max-tokens, or raise --ctx-size",
                a.batch, opening.size(), a.max_tokens, session.kv().capacity_tokens());
    }
  }
  fmt::print(stderr, "model: {}\n{}\n", session.file().summary(), build_description());
  fmt::print(stderr,
             "synth-prompts: {} prompts | {} format, {} opening tokens | temp {} top-p {} seed {} "
             "| turns of at most {} tokens | batch {} | {} excluded | {} threads\n",
             a.count, chat_format_name(tmpl.format()), opening.size(), a.temp, a.top_p, a.seed,
             a.max_tokens, a.batch, exclude.size(), a.threads);

  train::StatusLine status(stderr);
  auto progress = [&](const PromptSynthStats& s) {
    status.show(fmt::format("synth-prompts: {}/{} kept of {} turns | {:.0f} tok/s | {} elapsed, "
                            "~{} left",
                            s.kept, a.count, s.attempts,
                            s.seconds > 0 ? static_cast<double>(s.tokens) / s.seconds : 0.0,
                            train::format_duration(s.seconds),
                            train::format_duration(train::time_left(s.seconds, s.kept, a.count))));
  };
  PromptSynthStats s;
  const std::vector<std::string> prompts =
      synthesize_prompts(target, tok, opening, o, &s, progress);
  status.finish();
  SSD_CHECK(!prompts.empty(), "synth-prompts: no turn of {} was kept ({} truncated, {} too short)",
            s.attempts, s.truncated, s.too_short);

  if (a.out.has_parent_path()) std::filesystem::create_directories(a.out.parent_path(), ec);
  std::ofstream f(a.out, std::ios::binary | std::ios::trunc);
  SSD_CHECK(f.good(), "--out '{}' cannot be written", a.out.string());
  f << fmt::format(
      "# Written by `ssd synth-prompts` (runtime/train/prompt_synth.h): user turns sampled from\n"
      "# {} after its chat template's user-turn opening.\n"
      "# Flags: --count {} --batch {} --max-tokens {} --min-words {} --temp {} --top-p {} --seed {}"
      "{}\n"
      "# Kept {} of {} turns ({} truncated, {} too short, {} duplicates, {} excluded, {} with "
      "special tokens or unwritable).\n",
      a.model.filename().string(), a.count, a.batch, a.max_tokens, a.min_words, a.temp, a.top_p,
      a.seed, a.exclude.empty() ? "" : " --exclude " + a.exclude, s.kept, s.attempts, s.truncated,
      s.too_short, s.duplicates, s.excluded, s.unwritable);
  for (const std::string& p : prompts) f << to_prompt_line(p) << '\n';
  f.close();
  SSD_CHECK(f.good(), "--out '{}': writing failed", a.out.string());
  fmt::print(stderr,
             "synth-prompts: wrote {} | {} prompts from {} turns ({} truncated, {} too short, {} "
             "duplicates, {} excluded, {} unwritable) | wall {}\n",
             a.out.string(), s.kept, s.attempts, s.truncated, s.too_short, s.duplicates,
             s.excluded, s.unwritable, train::format_duration(s.seconds));
  if (s.kept < a.count)
    fmt::print(stderr, "synth-prompts: warning: only {} of the {} prompts asked for (attempts "
               "ran out)\n", s.kept, a.count);
  return 0;
}

}  // namespace

int run_synth_prompts_command(int argc, const char* const* argv) {
  SynthArgs args;
  if (parse_or_print_help(argc, argv, args, "ssd synth-prompts", kSummary)) return 0;
  return run_synth(args);
}

}  // namespace ssd
