// `ssd simulate --calibrate`: measure this machine and write the CPU device profile the round
// simulator prices forwards with (topology/sim/cpu_calibration.h), and, with drafters named,
// each drafter's own fit and the verifier's host cost (topology/sim/drafter_calibration.h).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "topology/sim/sim_config.h"

namespace ssd {

struct CalibrateOptions {
  std::string model;  // the target (GGUF or checkpoint)
  std::filesystem::path out;
  int32_t threads = 2;
  int32_t rows = 32;      // target forwards of 1..8 rows, then every 4th up to `rows`
  int32_t context = 128;  // cached tokens before each (and the drafters' prompt length)
  // --drafter specs to time in the runtime's SD loop (ngram, suffix, domino:PATH, model:PATH)
  std::vector<std::string> drafters;
  std::vector<int32_t> ks{2, 4, 7}, batches{1, 4};
  int32_t tokens = 24;  // generated per request in each drafter run
  int32_t branches = 8;  // pre-speculation calls: branches per sequence (0: none timed)
  // Each drafter's SD run at a (k, batch) is repeated this many times and its times taken as the
  // median (greedy: every repeat makes the same rounds), so one disturbed run moves nothing.
  int32_t repeats = 3;
};

int run_calibrate(const CalibrateOptions& o);

// `ssd simulate --probe`: a speed probe (topology/sim/speed_probe.h): the target's forwards at
// one row, a 12-row block and a decode batch of every batch size above 1 (o.batches), after
// o.context cached tokens, at o.threads; median of 5 samples of 4 forwards each, written to o.out
// as {"samples": [...]}. A fraction of a second, for before and after each measured job.
int run_probe(const CalibrateOptions& o);

// `ssd simulate --refit IN [--calibrate-model M] --out OUT`: profile IN refitted from the
// measurements it stores with the current fit models: the target's forwards (cpu_calibration.h;
// with M, the model they were timed on) and every drafter's runs (drafter_calibration.h); the
// verifier's host cost is kept. Replays of older measurements use it (perf/sim_validate.py).
int run_refit(const std::filesystem::path& in, const std::string& model,
              const std::filesystem::path& out);

// The simulator's drafter for a --drafter spec, named as `ssd simulate --drafter` names it (the
// key of its fit): ngram and suffix (lookups), smollm2-domino for domino:PATH (the committed
// Domino's shape), the model file's shape for model:PATH (its file name). Error for other kinds.
sim::SimDrafter sim_drafter_for_spec(const std::string& spec);

}  // namespace ssd
