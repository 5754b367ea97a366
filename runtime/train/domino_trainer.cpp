// The training loop (see domino_trainer.h).
#include "runtime/train/domino_trainer.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "runtime/core/error.h"
#include "runtime/drafters/domino/domino_checkpoint.h"
#include "runtime/train/frozen_target.h"
#include "runtime/train/param_init.h"
#include "runtime/train/train_checkpoint.h"
#include "runtime/train/train_progress.h"
#include "runtime/train/train_rng.h"

namespace ssd::train {
namespace {

constexpr uint64_t kStreamSequence = 1, kStreamAnchor = 2, kStreamKnown = 3;

std::string group_of(const std::string& name) {
  if (name.rfind("layers.", 0) == 0) return "backbone layers";
  if (name.rfind("head.gru", 0) == 0) return "head GRU";
  if (name == "head.w1.weight") return "head W1";
  if (name == "head.w2.weight") return "head W2";
  if (name == "fc.weight") return "fc (context projection)";
  return "norms + mask";
}

}  // namespace

float curriculum_lambda(const TrainOptions& o, int64_t step) {
  if (o.lambda_fixed) return *o.lambda_fixed;
  const double span = o.curriculum_frac * static_cast<double>(o.steps);
  if (span <= 0) return 0.0f;
  return static_cast<float>(std::max(0.0, 1.0 - static_cast<double>(step) / span));
}

std::vector<std::string> describe_run(const TrainOptions& o, double mean_len) {
  const ParamLayout layout(o.cfg);
  std::map<std::string, int64_t> groups;
  for (const ParamTensor& t : layout.tensors()) groups[group_of(t.name)] += t.size;
  std::vector<std::string> lines;
  std::string g = "params:";
  for (const auto& [k, v] : groups) g += fmt::format(" {} {:.3f}M |", k, v / 1e6);
  lines.push_back(g + fmt::format(" total {:.3f}M", layout.total() / 1e6));
  const int64_t bytes = layout.total() * (o.save_dtype == DType::F32 ? 4 : 2);
  lines.push_back(fmt::format("checkpoint: {:.1f} MB ({}), optimiser sidecar {:.1f} MB (f32 x 3)",
                              bytes / 1e6, dtype_name(o.save_dtype), layout.total() * 12 / 1e6));
  // FLOPs: the model's own estimate at the mean anchor (mean context = half a sequence).
  const int64_t ctx = static_cast<int64_t>(mean_len);
  const DominoConfig& c = o.cfg;
  const double d = c.target_dim, F = c.feature_dim(), qw = c.n_heads * c.head_dim,
               kw = c.n_kv_heads * c.head_dim, B = c.block_size, Vd = c.draft_vocab_size();
  const double A = o.anchors, R = A * B, M = A * (B - 1), Lx = c.n_layers;
  const double ctx_f = ctx * (F * d + Lx * 2 * d * kw);
  const double layer = R * (d * (qw + 2 * kw) + qw * d + 3 * d * c.ffn_dim) +
                       A * c.n_heads * B * (ctx / 2.0 + B) * c.head_dim * 2;
  const double head = M * ((d + c.gru_dim) * c.rank + c.rank * Vd + 3.0 * c.gru_dim * (d + c.gru_dim));
  const double per_seq = 2.0 * (3.0 * (ctx_f + Lx * layer + head) + 2.0 * M * d * Vd);
  lines.push_back(fmt::format("compute: ~{:.2f} GFLOP per step ({} seqs x {} anchors x block {}; "
                              "LM head over {} rows: {:.0f}% of it)",
                              per_seq * o.batch_seqs / 1e9, o.batch_seqs, o.anchors, c.block_size,
                              static_cast<int64_t>(Vd), 100.0 * 4.0 * M * d * Vd / per_seq));
  return lines;
}

TrainSummary train_domino(const ModelFile& target, const TrainData& data, const TrainOptions& o,
                          std::FILE* log) {
  using clock = std::chrono::steady_clock;
  const DominoConfig& cfg = o.cfg;
  cfg.validate("train-domino config");
  cfg.check_target(target.config().n_layers, target.config().dim, target.config().vocab,
                   "train-domino config");
  SSD_CHECK(o.steps >= 1 && o.batch_seqs >= 1 && o.anchors >= 1 && o.known_max >= 1,
            "train-domino: steps, batch-seqs, anchors and known-max must be >= 1");
  SSD_CHECK(o.init_from.empty() || o.resume.empty(),
            "train-domino: --init-from starts a new run and --resume continues one; not both");
  // Sequences with at least one response token to predict (P >= 1, L >= P + 1).
  std::vector<size_t> usable;
  double len_sum = 0;
  for (size_t i = 0; i < data.size; ++i) {
    const int32_t L = data.length(i), P = data.prompt_len(i);
    if (P >= 1 && L >= P + 1) {
      usable.push_back(i);
      len_sum += L;
    }
  }
  SSD_CHECK(!usable.empty(),
            "train-domino: no sequence of {} has a prompt and at least one response token",
            data.path.empty() ? "the data" : data.path);

  const FrozenTarget frozen(target, cfg.draft_vocab);
  const ParamLayout layout(cfg);
  std::vector<float> params(layout.total()), grads(layout.total());
  AdamWOptions ao = o.adam;
  ao.total_steps = o.steps;
  ao.warmup_steps = static_cast<int64_t>(std::llround(o.warmup_frac * o.steps));
  AdamW adam(layout, ao);
  TrainSummary sum;
  double wall_before = 0;
  if (!o.resume.empty()) {
    const DominoCheckpoint ck = [&] {
      try {
        return DominoCheckpoint::open(o.resume);
      } catch (const Error& e) {
        fail(fmt::format("--resume: {}", e.what()));
      }
    }();
    SSD_CHECK(ck.config().to_json() == cfg.to_json(),
              "--resume {}: its config {} differs from this run's {}", o.resume,
              ck.config().to_json(), cfg.to_json());
    OptimState st = load_optim_state(o.resume + ".optim", layout.total());
    SSD_CHECK(st.seed == o.seed, "--resume: the state was written with --seed {}, not {}", st.seed,
              o.seed);
    params = std::move(st.params);
    adam.m() = std::move(st.m);
    adam.v() = std::move(st.v);
    sum.first_step = st.step;
    wall_before = st.wall_seconds;
  } else if (!o.init_from.empty()) {
    params = load_checkpoint_params(o.init_from, cfg, layout);
    if (log) fmt::print(log, "init: every tensor from {}\n", o.init_from);
  } else {
    for (const std::string& line :
         init_params(layout, cfg, o.seed, &target, o.init_layers, o.fc_init, params.data()))
      if (log) fmt::print(log, "init: {}\n", line);
  }
  if (log)
    for (const std::string& line : describe_run(o, len_sum / usable.size()))
      fmt::print(log, "{}\n", line);

  DominoTrainModel model(cfg, frozen);
  ProgressReporter progress(log, o.log_json, !o.resume.empty());
  const auto t0 = clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(clock::now() - t0).count(); };
  int64_t step = sum.first_step;
  auto save = [&](int64_t at) {
    if (o.out.empty()) return;
    const std::map<std::string, std::string> prov = {
        {"train.command", o.command_line},
        {"train.step", std::to_string(at)},
        {"train.steps", std::to_string(o.steps)},
        {"train.seed", std::to_string(o.seed)},
        {"train.data", data.path},
        {"train.init_from", o.init_from},
        {"train.known_max", std::to_string(o.known_max)},
        {"train.wall_seconds", fmt::format("{:.1f}", wall_before + elapsed())}};
    save_checkpoint(o.out, cfg, layout, params.data(), o.save_dtype, prov);
    OptimState st{at, o.seed, wall_before + elapsed(), params, adam.m(), adam.v()};
    save_optim_state(o.out + ".optim", st);
  };

  LossStats window;
  double window_start = 0, grad_norm = 0;
  std::vector<int32_t> tokens, anchors(o.anchors);
  std::vector<float> feats;
  bool first_window = true;
  for (; step < o.steps; ++step) {
    std::fill(grads.begin(), grads.end(), 0.0f);
    DominoView gv = make_view(layout, cfg, grads.data());
    LossOptions lo;
    lo.lambda = curriculum_lambda(o, step);
    lo.gamma = o.gamma;
    lo.head_inputs = o.head_inputs;
    lo.loss_scale = 1.0f / static_cast<float>(o.batch_seqs * o.anchors);
    for (int64_t s = 0; s < o.batch_seqs; ++s) {
      const uint64_t draw = static_cast<uint64_t>(step * o.batch_seqs + s);
      const size_t idx = usable[rng_below(o.seed, kStreamSequence, draw, usable.size())];
      data.read(idx, tokens, feats);
      const int32_t L = static_cast<int32_t>(tokens.size()), P = data.prompt_len(idx);
      // Known tokens of this sequence's blocks: 1, or uniform in 1..known_max (SSD shapes),
      // as many as the sequence allows (the first anchor is P - 1).
      lo.known = 1;
      if (o.known_max > 1)
        lo.known = 1 + static_cast<int32_t>(rng_below(o.seed, kStreamKnown, draw, o.known_max));
      lo.known = std::min(lo.known, L - 1);
      const int32_t first = std::max(P - 1, lo.known - 1);
      for (int64_t k = 0; k < o.anchors; ++k)
        anchors[k] = first + static_cast<int32_t>(rng_below(
                                 o.seed, kStreamAnchor, draw * o.anchors + k, L - 1 - first));
      window.add(model.run(make_view(layout, cfg, static_cast<const float*>(params.data())), &gv,
                           tokens, feats, anchors, lo));
    }
    grad_norm = adam.step(params.data(), grads.data(), step);
    const bool last = step + 1 == o.steps;
    const bool timeout = (o.max_minutes > 0 && elapsed() >= o.max_minutes * 60.0) ||
                         (o.stop_at_step > 0 && step + 1 >= o.stop_at_step);
    const bool log_step = last || timeout || (o.log_every > 0 && (step + 1) % o.log_every == 0);
    const double now = elapsed();
    ProgressPoint p;
    p.step = step + 1;
    p.total = o.steps;
    const double nb = std::max<int64_t>(1, window.blocks);
    p.loss = window.loss / nb;
    p.ce_final = window.ce_final / nb;
    p.ce_base = window.ce_base / nb;
    p.lambda = lo.lambda;
    p.acc1 = window.acc1_total ? static_cast<double>(window.acc1_hits) / window.acc1_total : 0;
    p.oov = window.labels ? static_cast<double>(window.oov) / window.labels : 0;
    p.lr = lr_at(ao, step);
    p.grad_norm = grad_norm;
    const double span = std::max(1e-9, now - window_start);
    p.tokens_per_s = window.tokens / span;
    p.steps_per_s = (step + 1 - sum.first_step) / std::max(1e-9, now);
    p.elapsed_s = wall_before + now;
    progress.report(p, log_step);
    if (log_step) {
      if (first_window) sum.first_log = window;
      first_window = false;
      sum.last_log = window;
      window = {};
      window_start = now;
    }
    if (o.save_every > 0 && (step + 1) % o.save_every == 0 && !last) save(step + 1);
    if (timeout && !last) {
      sum.stopped_by_time = true;
      ++step;
      break;
    }
  }
  progress.finish();
  sum.steps_done = step;
  sum.wall_seconds = elapsed();
  const int64_t done = step - sum.first_step;
  sum.steps_per_s = done / std::max(1e-9, sum.wall_seconds);
  sum.tokens_per_s = sum.steps_per_s * o.batch_seqs * o.anchors * cfg.block_size;
  save(step);
  return sum;
}

}  // namespace ssd::train
