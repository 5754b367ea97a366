// How each request of `ssd generate` and `ssd bench` is decoded, declared once: its token budget,
// the chat template, end-of-generation, the sampler, and SD's draft width. Each command holds one
// DecodeFlags (with its own defaults for -n and --chat) and calls its visit() from its own.
#pragma once

#include <cstdint>

#include "launch/cli/flags.h"
#include "runtime/sampling/sampler.h"

namespace ssd {

struct DecodeFlags {
  int64_t n_predict = 128;
  bool chat = false;
  bool ignore_eos = false;
  float temp = 0;
  int32_t top_k = 0;
  float top_p = 1;
  float min_p = 0;
  uint64_t seed = 0;
  int32_t width = 1;

  template <class V>
  void visit(V&& v) {
    v(n_predict, "n", "tokens to generate (per prompt)", {.short_name = 'n', .min = 0});
    v(chat, "chat", "wrap each prompt in the model's chat template as a user message");
    v(ignore_eos, "ignore-eos", "keep generating past end-of-generation tokens (benchmarks)");
    v(temp, "temp", "sampling temperature; 0 = greedy (ssd bench then checks SD == AR)",
      {.min = 0, .max = 100});
    v(top_k, "top-k", "keep only the k likeliest tokens; 0 = off", {.min = 0});
    v(top_p, "top-p", "nucleus sampling mass; 1 = off", {.min = 1e-6, .max = 1});
    v(min_p, "min-p", "drop tokens below min-p x the top probability; 0 = off",
      {.min = 0, .max = 1});
    v(seed, "seed", "sampling seed: the same seed gives the same tokens, bit for bit");
    v(width, "width", "sd: first-level draft branches verified as a tree (1 = a chain)",
      {.min = 1, .max = 16});
  }

  SamplerConfig sampler() const { return SamplerConfig{temp, top_k, top_p, min_p, seed}; }
};

}  // namespace ssd
