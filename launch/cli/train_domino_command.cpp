// `ssd train-domino` (see train_domino_command.h): flags -> TrainOptions, checks of the dataset
// against the target and the flags, then train_domino.
#include "launch/cli/train_domino_command.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <charconv>
#include <optional>

#include "launch/cli/flags.h"
#include "runtime/core/error.h"
#include "runtime/drafters/domino/domino_checkpoint.h"
#include "runtime/model/model_file.h"
#include "runtime/train/distill_dataset.h"
#include "runtime/train/domino_trainer.h"
#include "runtime/train/draft_vocab.h"
#include "runtime/train/ops_linear.h"
#include "runtime/train/train_data_source.h"

namespace ssd {
namespace {

struct TrainDominoArgs {
  std::filesystem::path model, data, out;
  int32_t block_size = 16, layers = 2;
  std::optional<int32_t> ffn_dim, heads, kv_heads, head_dim;
  std::optional<std::string> target_layers, init_layers;
  int32_t gru_dim = 256, rank = 64;
  std::optional<float> gamma, lambda_fixed;
  int64_t steps = 2000, batch_seqs = 4, anchors = 8;
  double lr = 3e-4, warmup_frac = 0.03, curriculum_frac = 0.5, weight_decay = 0.01, clip = 1.0;
  std::string head_inputs = "teacher", fc_init = "deepest";
  int64_t draft_vocab = 0;
  bool context_inject = false;
  int32_t known_max = 1;
  std::optional<std::filesystem::path> init_from;
  uint64_t seed = 1;
  int32_t threads = 2;
  std::optional<std::filesystem::path> resume, log_json;
  int64_t save_every = 0, log_every = 10;
  std::string save_dtype = "bf16";
  double max_minutes = 0;

  template <class V>
  void visit(V&& v) {
    v(model, "model", "target model (GGUF file or safetensors directory)",
      {.required = true, .short_name = 'm', .must_exist = true});
    v(data, "data", "self-distillation dataset written by `ssd distill`",
      {.required = true, .must_exist = true});
    v(out, "out", "checkpoint to write (.safetensors; PATH.optim is written beside it)",
      kRequired);
    v(block_size, "block-size", "block B = [anchor, MASK x (B-1)]", {.min = 2, .max = 64});
    v(layers, "layers", "backbone decoder layers", {.min = 1, .max = 32});
    v(ffn_dim, "ffn-dim", "backbone SwiGLU width (default: the target's)", {.min = 1});
    v(heads, "heads", "backbone query heads (default: the target's)", {.min = 1});
    v(kv_heads, "kv-heads", "backbone KV heads (default: the target's)", {.min = 1});
    v(head_dim, "head-dim", "backbone head width (default: the target's)", {.min = 2});
    v(target_layers, "target-layers",
      "target layers of the features, e.g. 1,15,28 (default and required: the dataset's)");
    v(gru_dim, "gru-dim", "Domino head GRU width", {.min = 1});
    v(rank, "rank", "low-rank correction bottleneck", {.min = 1});
    v(gamma, "gamma", "position-weight decay w_i = exp(-(i-1)/gamma) (default 7 * B / 16)",
      {.min = 0.01});
    v(steps, "steps", "optimiser steps", {.min = 1});
    v(batch_seqs, "batch-seqs", "sequences per step", {.min = 1});
    v(anchors, "anchors", "random anchors (blocks) per sequence", {.min = 1});
    v(lr, "lr", "peak learning rate (cosine decay to 10%)", {.min = 0});
    v(warmup_frac, "warmup-frac", "fraction of steps of linear warm-up", {.min = 0, .max = 1});
    v(curriculum_frac, "curriculum-frac",
      "fraction of steps over which lambda (base-CE weight) goes 1 -> 0", {.min = 0, .max = 1});
    v(lambda_fixed, "lambda-fixed", "fixed lambda instead of the curriculum (0 = final CE only)",
      {.min = 0, .max = 1});
    v(weight_decay, "weight-decay", "AdamW decoupled weight decay (matrices only)", {.min = 0});
    v(clip, "clip", "global gradient-norm clip (0 = off)", {.min = 0});
    v(head_inputs, "head-inputs",
      "GRU inputs in training: teacher (ground truth) or sampled (own argmax)",
      {.choices = {"teacher", "sampled"}});
    v(draft_vocab, "draft-vocab",
      "reduced draft vocabulary: the N most frequent response tokens (0 = full)", {.min = 0});
    v(context_inject, "context-inject",
      "add the last context entry, projected (ctx_inject.weight, starts at 0), to every block row");
    v(init_layers, "init-layers",
      "target layers copied into the backbone layers (default: the ones right after the deepest "
      "feature layer, else the target's last ones)");
    v(fc_init, "fc-init",
      "context projection at step 0: deepest (identity on the deepest feature layer, so the first "
      "copied layer sees that layer's context K/V) or random",
      {.choices = {"deepest", "random"}});
    v(known_max, "known-max",
      "blocks get 1..N known tokens without features (N > 1: also SSD's pre-speculation shape)",
      {.min = 1, .max = 16});
    v(init_from, "init-from",
      "start a new run from this checkpoint's weights and config (fine-tuning; the architecture "
      "flags are then ignored)",
      {.must_exist = true});
    v(seed, "seed", "random seed (initialisation, sequences, anchors)");
    v(threads, "threads", "OpenBLAS threads", {.min = 1, .max = 256});
    v(resume, "resume", "checkpoint to resume from (needs its PATH.optim)", {.must_exist = true});
    v(save_every, "save-every", "also save every N steps (0 = only at the end)", {.min = 0});
    v(log_every, "log-every", "progress line every N steps (when not a TTY) and JSON log",
      {.min = 1});
    v(log_json, "log-json", "JSON-lines log: one object per log step");
    v(save_dtype, "save-dtype", "checkpoint tensor type", {.choices = {"bf16", "f32"}});
    v(max_minutes, "max-minutes", "stop cleanly (saving) after this wall time (0 = none)",
      {.min = 0});
  }
};

std::vector<int32_t> parse_ints(const std::string& text, const char* flag) {
  std::vector<int32_t> out;
  size_t at = 0;
  while (at <= text.size()) {
    const size_t end = std::min(text.find(',', at), text.size());
    int32_t v = 0;
    const auto r = std::from_chars(text.data() + at, text.data() + end, v);
    SSD_CHECK(r.ec == std::errc() && r.ptr == text.data() + end && end > at,
              "--{} '{}': expected comma-separated integers", flag, text);
    out.push_back(v);
    at = end + 1;
  }
  return out;
}

}  // namespace

int run_train_domino_command(int argc, const char* const* argv) {
  TrainDominoArgs a;
  if (parse_or_print_help(argc, argv, a, "ssd train-domino",
                          "Train a Domino drafter for a target from `ssd distill` data."))
    return 0;
  std::string command = "ssd train-domino";
  for (int i = 0; i < argc; ++i) command += fmt::format(" {}", argv[i]);

  const ModelFile target = ModelFile::open(a.model.string());
  const ModelConfig& tc = target.config();
  const DistillDataset ds = DistillDataset::open(a.data.string());
  ds.check_target(tc.dim, tc.vocab);
  if (ds.model_digest() != model_file_digest(a.model.string()))
    fmt::print(stderr, "ssd train-domino: warning: --data was distilled from another model file "
                       "(digest {} vs {})\n", ds.model_digest(), model_file_digest(a.model.string()));
  if (a.target_layers) {
    const std::vector<int32_t> want = parse_ints(*a.target_layers, "target-layers");
    SSD_CHECK(want == ds.target_layers(),
              "--target-layers {} differ from the dataset's layers {}: the features on disk are "
              "those layers (re-run `ssd distill` to change them)",
              fmt::join(want, ","), fmt::join(ds.target_layers(), ","));
  }

  train::TrainOptions o;
  DominoConfig& c = o.cfg;
  c.block_size = a.block_size;
  c.n_layers = a.layers;
  c.n_heads = a.heads.value_or(static_cast<int32_t>(tc.n_heads));
  c.n_kv_heads = a.kv_heads.value_or(static_cast<int32_t>(tc.n_kv_heads));
  c.head_dim = a.head_dim.value_or(static_cast<int32_t>(tc.head_dim));
  c.ffn_dim = a.ffn_dim.value_or(static_cast<int32_t>(tc.ffn_dim));
  c.target_layers = ds.target_layers();
  c.gru_dim = a.gru_dim;
  c.rank = a.rank;
  c.rms_eps = tc.rms_eps;
  c.rope_theta = tc.rope_theta;
  c.target_dim = tc.dim;
  c.target_vocab = tc.vocab;
  if (a.draft_vocab > 0 && !a.init_from) {
    const std::vector<int64_t> counts = ds.response_token_counts();
    c.draft_vocab = train::select_draft_vocab(counts, a.draft_vocab);
    fmt::print(stderr, "draft vocabulary: {} ids cover {:.2f}% of the response tokens\n",
               c.draft_vocab.size(), 100.0 * train::draft_vocab_coverage(counts, c.draft_vocab));
  }
  c.context_inject = a.context_inject;
  c.validate("ssd train-domino flags");
  if (a.init_from) {
    c = DominoCheckpoint::open(a.init_from->string()).config();
    c.check_target(tc.n_layers, tc.dim, tc.vocab, "--init-from " + a.init_from->string());
    ds.check_layers(c.target_layers, "--init-from " + a.init_from->string());
    fmt::print(stderr, "config: from --init-from {}\n", a.init_from->string());
  }
  o.steps = a.steps;
  o.batch_seqs = a.batch_seqs;
  o.anchors = a.anchors;
  o.gamma = a.gamma.value_or(7.0f * static_cast<float>(a.block_size) / 16.0f);
  o.lambda_fixed = a.lambda_fixed;
  o.curriculum_frac = a.curriculum_frac;
  o.warmup_frac = a.warmup_frac;
  o.head_inputs = a.head_inputs == "sampled" ? train::HeadInputs::Sampled
                                             : train::HeadInputs::Teacher;
  o.adam.lr = a.lr;
  o.adam.weight_decay = a.weight_decay;
  o.adam.clip = a.clip;
  if (a.init_layers) {
    o.init_layers = parse_ints(*a.init_layers, "init-layers");
    SSD_CHECK(static_cast<int32_t>(o.init_layers.size()) == c.n_layers,
              "--init-layers lists {} layers for --layers {}", o.init_layers.size(), c.n_layers);
  } else {
    o.init_layers = train::default_init_layers(c, tc.n_layers);
  }
  o.fc_init = a.fc_init == "random" ? train::FcInit::Random : train::FcInit::Deepest;
  o.seed = a.seed;
  o.out = a.out.string();
  o.resume = a.resume ? a.resume->string() : "";
  o.init_from = a.init_from ? a.init_from->string() : "";
  o.known_max = a.known_max;
  o.save_every = a.save_every;
  o.log_every = a.log_every;
  o.log_json = a.log_json ? a.log_json->string() : "";
  o.save_dtype = a.save_dtype == "f32" ? DType::F32 : DType::BF16;
  o.max_minutes = a.max_minutes;
  o.command_line = command;
  train::set_blas_threads(a.threads);

  fmt::print(stderr, "{}\n", target.summary());
  fmt::print(stderr, "data: {} sequences, {} tokens ({} response), layers {}\n", ds.size(),
             ds.total_tokens(), ds.response_tokens(), fmt::join(ds.target_layers(), ","));
  const train::TrainSummary s = train::train_domino(target, train::train_data_from(ds), o, stderr);
  fmt::print(stderr,
             "done: steps {}..{} in {:.1f}s | {:.3f} steps/s | {:.0f} block tokens/s{} | "
             "wrote {} (+ .optim)\n",
             s.first_step, s.steps_done, s.wall_seconds, s.steps_per_s, s.tokens_per_s,
             s.stopped_by_time ? " | stopped at --max-minutes" : "", o.out);
  return 0;
}

}  // namespace ssd
