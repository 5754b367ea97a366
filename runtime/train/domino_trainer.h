// The Domino training run (`ssd train-domino`): samples batches of
// (sequence, anchor) blocks from a self-distillation dataset, runs DominoTrainModel forward and
// backward, updates with AdamW, and reports, saves and resumes.
//
// A step = batch_seqs sequences x anchors random anchors each (a uniform in [P-1, L-2]; the
// context K/V of a sequence is computed once and shared by its blocks). With known_max > 1 each
// sequence's blocks get kn known tokens, kn uniform in 1..known_max: [t[a-kn+1..a], MASK...]
// after the context [0, a-kn+1), the shape SSD's pre-speculation drafts (accepted tokens and the
// bonus, which have no target features yet). Loss = mean over the
// step's blocks. lambda (the base-CE weight) goes linearly from 1 to 0 over the first
// curriculum_frac of the steps, then stays 0 (the base-anchored curriculum); lambda_fixed
// overrides it. All randomness is a function of (seed, step) (train_rng.h).
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "runtime/core/dtype.h"
#include "runtime/model/model_file.h"
#include "runtime/train/adamw.h"
#include "runtime/train/domino_train_model.h"
#include "runtime/train/param_init.h"

namespace ssd::train {

// Where the sequences come from (DistillDataset in the command, in-memory data in tests).
struct TrainData {
  size_t size = 0;
  std::function<int32_t(size_t)> length;      // L of sequence i
  std::function<int32_t(size_t)> prompt_len;  // P of sequence i
  // tokens [L], features [L, F]
  std::function<void(size_t, std::vector<int32_t>&, std::vector<float>&)> read;
  std::string path;  // for provenance
};

struct TrainOptions {
  DominoConfig cfg;
  int64_t steps = 1000, batch_seqs = 4, anchors = 8;
  float gamma = 7.0f;
  std::optional<float> lambda_fixed;
  double curriculum_frac = 0.5, warmup_frac = 0.03;
  HeadInputs head_inputs = HeadInputs::Teacher;
  AdamWOptions adam;                 // lr, weight_decay, clip (warm-up/total filled in here)
  std::vector<int32_t> init_layers;  // one per backbone layer; empty = random layers
  FcInit fc_init = FcInit::Deepest;  // param_init.h
  uint64_t seed = 1;
  std::string out;                   // checkpoint path; the sidecar is out + ".optim"
  std::string resume;                // checkpoint to resume from (its .optim sidecar too)
  std::string init_from;             // a new run starting from this checkpoint's weights
  int32_t known_max = 1;             // blocks get 1..known_max known tokens (the SSD shape)
  int64_t save_every = 0, log_every = 10;
  std::string log_json;
  DType save_dtype = DType::BF16;
  double max_minutes = 0;            // 0 = no limit
  int64_t stop_at_step = 0;          // > 0: stop (and save) after this many steps, as if the
                                     // time ran out; the schedule still spans `steps`
  std::string command_line;          // provenance
};

struct TrainSummary {
  int64_t first_step = 0, steps_done = 0;  // steps_done: the step count reached
  double wall_seconds = 0, steps_per_s = 0, tokens_per_s = 0;
  LossStats first_log, last_log;           // stats of the first / last logged window
  bool stopped_by_time = false;
};

// The parameter count of each tensor group, the checkpoint size and FLOPs per step, as lines.
std::vector<std::string> describe_run(const TrainOptions& o, double mean_len);

// Runs the whole training; `log` receives the progress (null = silent).
TrainSummary train_domino(const ModelFile& target, const TrainData& data, const TrainOptions& o,
                          std::FILE* log);

// lambda at `step` (0-based) of `total`.
float curriculum_lambda(const TrainOptions& o, int64_t step);

}  // namespace ssd::train
