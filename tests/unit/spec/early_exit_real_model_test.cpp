// The early-exit drafter on the real default model (env SSD_MODEL; skipped visibly without it):
// greedy SD with early-exit:8 (8 of SmolLM2's 30 layers) equals AR token for token, with and
// without DVI online learning (2 prompts x 32 tokens); and, when SSD_DVI_CURVE is set, a longer
// run that prints the acceptance rate per 20-round window with and without online learning (the
// DVI issue's "how acceptance changes over a long run"), plus the training cost.
//
// SSD_DVI_CURVE=N: N new tokens per prompt over the 8 chat prompts below; SSD_DVI_PASSES (default
// 2) passes for the learning drafter, SSD_DVI_ONLY_LEARN skips the untrained reference run, and
// SSD_DVI_L / SSD_DVI_RANK / SSD_DVI_LR / SSD_DVI_NKL / SSD_DVI_M override L, the LoRA rank, the
// learning rate, N_kl and M. N = 48 takes about 3 minutes on 2 cores. Nothing is asserted about
// the curve (it is a measurement), only that the outputs still equal AR.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>

#include "runtime/drafters/early_exit_drafter.h"
#include "tests/unit/spec/drafting_fixture.h"

namespace ssd {
namespace {

using test::drafting::Engine;

// SmolLM2 token ids (ssd_tokenize) of "<|im_start|>user\n{question}<|im_end|>\n<|im_start|>
// assistant\n" for: the capital of France; a Python function reversing a string; why the sky is
// blue; three work-from-home tips; 17 times 23; a JSON object for a book; Romeo and Juliet's
// plot; sorting a list of dicts by key in Python.
const std::vector<std::vector<int32_t>> kChatPrompts = {
    {1, 4093, 198, 1780, 314, 260, 3575, 282, 4649, 47, 2, 198, 1, 520, 9531, 198},
    {1, 4093, 198, 19161, 253, 5905, 1517, 338, 10557, 266, 253, 4928, 30, 2, 198, 1, 520, 9531,
     198},
    {1, 4093, 198, 36971, 1701, 260, 6376, 314, 4461, 281, 827, 8545, 30, 2, 198, 1, 520, 9531, 198},
    {1, 4093, 198, 6106, 1296, 5608, 327, 9286, 10231, 645, 1891, 429, 1478, 30, 2, 198, 1, 520,
     9531, 198},
    {1, 4093, 198, 1780, 314, 216, 33, 39, 1711, 216, 34, 35, 47, 11890, 469, 3301, 30, 2, 198, 1,
     520, 9531, 198},
    {1, 4093, 198, 19161, 253, 1890, 20110, 1569, 10131, 253, 1863, 351, 5038, 28, 1919, 284, 713,
     30, 2, 198, 1, 520, 9531, 198},
    {1, 4093, 198, 13764, 3298, 836, 260, 5049, 282, 30493, 284, 29117, 30, 2, 198, 1, 520, 9531,
     198},
    {1, 4093, 198, 2020, 536, 339, 4440, 253, 1398, 282, 23573, 411, 253, 1646, 281, 5905, 47, 2,
     198, 1, 520, 9531, 198},
};

const char* model_path() {
  const char* env = std::getenv("SSD_MODEL");
  return env && std::filesystem::exists(env) ? env : nullptr;
}

double env_or(const char* name, double def) {
  const char* v = std::getenv(name);
  return v ? std::atof(v) : def;
}

// The defaults of EarlyExitOptions with L = 8; the curve run can vary L, the LoRA rank and the
// learning rate through SSD_DVI_L, SSD_DVI_RANK, SSD_DVI_LR.
EarlyExitOptions real_options(bool learn, bool from_env = false) {
  EarlyExitOptions o;
  o.layers = from_env ? static_cast<int64_t>(env_or("SSD_DVI_L", 8)) : 8;
  o.online_learning = learn;
  o.kv_tokens = 2048;
  if (from_env) {
    o.lora.rank = static_cast<int32_t>(env_or("SSD_DVI_RANK", o.lora.rank));
    o.dvi.lr = env_or("SSD_DVI_LR", o.dvi.lr);
    o.dvi.kl_updates = static_cast<int32_t>(env_or("SSD_DVI_NKL", o.dvi.kl_updates));
    o.dvi.train_every = static_cast<int32_t>(env_or("SSD_DVI_M", o.dvi.train_every));
  }
  return o;
}

TEST(EarlyExitRealModel, GreedySdEqualsAr) {
  const char* path = model_path();
  if (!path) GTEST_SKIP() << "set SSD_MODEL to the default model's GGUF to run this test";
  Engine target(path, 2, 512);
  const std::vector<int32_t> ar[2] = {target.ar(kChatPrompts[0], 32).tokens,
                                      target.ar(kChatPrompts[1], 32).tokens};
  for (bool learn : {false, true}) {
    EarlyExitDrafter d(target.file, *target.backend, real_options(learn));
    for (size_t p = 0; p < 2; ++p) {
      const auto sd = target.sd(d, kChatPrompts[p], 32, 4, 1);
      EXPECT_EQ(sd.gen.tokens, ar[p]) << d.name() << " prompt " << p;
      std::cout << "  " << d.name() << " prompt " << p << ": mean acceptance length "
                << sd.stats.mean_acceptance_length() << ", draft " << sd.stats.draft_s
                << " s, verify " << sd.stats.verify_s << " s\n";
    }
  }
}

// Prints the curve of one drafter over `passes` passes of the chat prompts; returns its rounds.
std::vector<RoundRecord> serve_curve(Engine& target, EarlyExitDrafter& d, int64_t tokens, int passes,
                                     const std::vector<std::vector<int32_t>>& ar_out) {
  const int32_t k = 4;
  const auto t0 = std::chrono::steady_clock::now();
  double draft_s = 0, verify_s = 0;
  for (int pass = 0; pass < passes; ++pass)
    for (size_t p = 0; p < kChatPrompts.size(); ++p) {
      const auto sd = target.sd(d, kChatPrompts[p], tokens, k, 1);
      EXPECT_EQ(sd.gen.tokens, ar_out[p]) << d.name() << " prompt " << p;
      draft_s += sd.stats.draft_s;
      verify_s += sd.stats.verify_s;
    }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const auto& r = d.rounds();
  const int64_t n = static_cast<int64_t>(r.size());
  std::cout << "== " << d.name() << ", K = " << k << ", " << passes << " pass(es) of "
            << kChatPrompts.size() << " prompts x " << tokens << " tokens: " << n << " rounds, "
            << wall << " s (draft " << draft_s << " s, verify " << verify_s << " s)\n";
  std::cout << format_acceptance_curve(acceptance_windows(r, 20));
  const auto first = acceptance_over(r, 0, n / 4), last = acceptance_over(r, n - n / 4, n);
  std::cout << "first quarter: accept " << first.rate() << ", last quarter: accept " << last.rate()
            << "\n";
  if (const DviTrainer* t = d.trainer()) {
    const DviStats& s = t->stats();
    std::cout << "DVI: " << s.tuples << " tuples (" << s.rewarded << " rewarded), " << s.updates
              << " updates (" << s.kl_phase_updates << " KL-only), train " << s.train_s << " s ("
              << 1e3 * s.train_s / std::max<int64_t>(1, s.updates) << " ms/update), logging "
              << s.log_s << " s, last batch loss kl " << s.last_loss.kl << " ce " << s.last_loss.ce
              << " pg " << s.last_loss.pg << ", baseline " << s.baseline << "\n";
  }
  return r;
}

// The untrained drafter serves the prompts once (its curve repeats exactly on later passes); the
// learning one serves them SSD_DVI_PASSES times (default 2), so the curve shows both what it
// learns on unseen requests (pass 1) and on recurring ones (pass 2).
TEST(EarlyExitRealModel, AcceptanceCurveOverALongRun) {
  const char* path = model_path();
  if (!path) GTEST_SKIP() << "set SSD_MODEL to the default model's GGUF to run this test";
  const char* curve = std::getenv("SSD_DVI_CURVE");
  if (!curve) GTEST_SKIP() << "set SSD_DVI_CURVE=<tokens per prompt> (e.g. 48) to measure the curve";
  const int64_t tokens = std::max(8, std::atoi(curve));
  const int passes = std::max(1, static_cast<int>(env_or("SSD_DVI_PASSES", 2)));
  Engine target(path, 2, 2048);
  std::vector<std::vector<int32_t>> ar_out;
  for (const auto& p : kChatPrompts) ar_out.push_back(target.ar(p, tokens).tokens);
  if (!std::getenv("SSD_DVI_ONLY_LEARN")) {
    EarlyExitDrafter plain(target.file, *target.backend, real_options(false, true));
    serve_curve(target, plain, tokens, 1, ar_out);
  }
  EarlyExitDrafter dvi(target.file, *target.backend, real_options(true, true));
  serve_curve(target, dvi, tokens, passes, ar_out);
}

}  // namespace
}  // namespace ssd
