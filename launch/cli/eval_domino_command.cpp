// `ssd eval-domino` (see eval_domino_command.h): flags -> EvalOptions, the dataset checked
// against the target, the checkpoint read as float32, one report table.
#include "launch/cli/eval_domino_command.h"

#include <fmt/format.h>

#include "launch/cli/flags.h"
#include "runtime/core/error.h"
#include "runtime/drafters/domino/domino_checkpoint.h"
#include "runtime/model/model_file.h"
#include "runtime/train/distill_dataset.h"
#include "runtime/train/domino_eval.h"
#include "runtime/train/frozen_target.h"
#include "runtime/train/ops_linear.h"
#include "runtime/train/train_checkpoint.h"
#include "runtime/train/train_data_source.h"

namespace ssd {
namespace {

struct EvalDominoArgs {
  std::filesystem::path model, data, drafter;
  int32_t rows = 0, stride = 4, max_anchors = 48, threads = 2, known = 1;
  int64_t max_seqs = 0;

  template <class V>
  void visit(V&& v) {
    v(model, "model", "target model (GGUF file or safetensors directory)",
      {.required = true, .short_name = 'm', .must_exist = true});
    v(data, "data", "self-distillation dataset written by `ssd distill` (a held-out one)",
      {.required = true, .must_exist = true});
    v(drafter, "drafter", "Domino checkpoint (.safetensors)", {.required = true, .must_exist = true});
    v(rows, "rows", "block rows [anchor, MASK x (rows-1)] (0 = the checkpoint's block size)",
      {.min = 0, .max = 64});
    v(known, "known",
      "known tokens per block without features (1: SD's shape; 2..K+2: SSD's pre-speculation)",
      {.min = 1, .max = 16});
    v(stride, "stride", "one anchor every N response positions", {.min = 1});
    v(max_anchors, "max-anchors", "at most N anchors per sequence (spread evenly)", {.min = 1});
    v(max_seqs, "max-seqs", "evaluate the first N sequences (0 = all)", {.min = 0});
    v(threads, "threads", "OpenBLAS threads", {.min = 1, .max = 256});
  }
};

}  // namespace

int run_eval_domino_command(int argc, const char* const* argv) {
  EvalDominoArgs a;
  if (parse_or_print_help(argc, argv, a, "ssd eval-domino",
                          "Offline acceptance of a Domino checkpoint on `ssd distill` data."))
    return 0;
  SSD_CHECK(a.rows != 1, "--rows 1: a block needs the anchor and at least one MASK row");
  const ModelFile target = ModelFile::open(a.model.string());
  const ModelConfig& tc = target.config();
  const DistillDataset ds = DistillDataset::open(a.data.string());
  ds.check_target(tc.dim, tc.vocab);
  const DominoConfig cfg = DominoCheckpoint::open(a.drafter.string()).config();
  cfg.check_target(tc.n_layers, tc.dim, tc.vocab, "--drafter " + a.drafter.string());
  ds.check_layers(cfg.target_layers, "--drafter");
  train::set_blas_threads(a.threads);
  const train::ParamLayout layout(cfg);
  const std::vector<float> params = train::load_checkpoint_params(a.drafter.string(), cfg, layout);
  const train::FrozenTarget frozen(target, cfg.draft_vocab);
  train::EvalOptions o;
  o.rows = a.rows;
  o.stride = a.stride;
  o.max_seqs = a.max_seqs;
  o.max_anchors = a.max_anchors;
  o.known = a.known;
  const train::EvalReport r =
      train::evaluate_domino(cfg, frozen, params, train::train_data_from(ds), o);
  SSD_CHECK(r.blocks > 0, "--data {}: no response is long enough for a block of {} rows",
            a.data.string(), r.rows);

  fmt::print("eval-domino: {} on {} ({} sequences, {} blocks of {} rows, {} known)\n",
             a.drafter.string(), a.data.string(), r.seqs, r.blocks, r.rows, a.known);
  fmt::print("CE per block (position-weighted): final {:.3f}, base {:.3f}\n", r.ce_final, r.ce_base);
  fmt::print("{:>8} {:>10} {:>10} {:>14}\n", "position", "acc final", "acc base", "accepted = i");
  for (int32_t i = 0; i < r.rows; ++i)
    fmt::print("{:>8} {:>10} {:>10} {:>14}\n", i,
               i == 0 ? std::string("-") : fmt::format("{:.3f}", r.acc_final(i)),
               i == 0 ? std::string("-") : fmt::format("{:.3f}", r.acc_base(i)), r.accepted[i]);
  fmt::print("offline MAL (greedy, bonus included):");
  for (int32_t k : {1, 3, 7, 15})
    if (k < r.rows) fmt::print("  k={} {:.3f}", k, r.mal(k));
  fmt::print("\n");
  return 0;
}

}  // namespace ssd
