// SsdDrafterCore on the real default model (env SSD_MODEL; skipped visibly without it): greedy
// in-process SSD (ssd_sim.h) equals AR token for token with the model drafting for itself and
// with prompt lookup, batch 2, K = 4, geometric fan-out; the self-draft hits the cache in most
// rounds. Q4_1 matmuls grouped differently (1 row, K + 1 rows, a batch of branches) can flip a
// near-tie of the draft against the target now and then, so a few misses are allowed: >= 80% hits.
// Prints the figures (hit rate, acceptance after hit / miss, time pre-speculating and in
// fallbacks).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "runtime/drafters/model_drafter.h"
#include "runtime/drafters/ngram_drafter.h"
#include "tests/unit/saguaro/ssd_sim.h"
#include "tests/unit/spec/drafting_fixture.h"

namespace ssd {
namespace {

using test::drafting::Engine;
using test::drafting::gguf_vocab;

// SmolLM2 token ids of the chat prompts "What is the capital of France?" and "Write a Python
// function that reverses a string." (as in tests/unit/spec/model_drafter_test.cpp).
const std::vector<std::vector<int32_t>> kChat = {
    {1, 4093, 198, 1780, 314, 260, 3575, 282, 4649, 47, 2, 198, 1, 520, 9531, 198},
    {1, 4093, 198, 19161, 253, 5905, 1517, 338, 10557, 266, 253, 4928, 30, 2, 198, 1, 520, 9531,
     198},
};

void print(const char* what, const SsdDrafterStats& st) {
  std::cout << "  " << what << ": rounds " << st.rounds << ", hit rate " << st.hit_rate()
            << ", acceptance length after hit " << st.mean_acceptance_length_hit()
            << " / after miss " << st.mean_acceptance_length_miss() << "\n    branches "
            << st.branches << " in " << st.prespec_calls << " pre-speculation calls, "
            << st.prespec_s / std::max<int64_t>(1, st.prespec_calls) << " s per call; round 0 "
            << "draft (2 sequences, K + 1 deep) " << st.initial_s << " s; fallbacks "
            << st.fallback_s << " s\n";
}

TEST(SsdRealModel, GreedySsdEqualsArWithSelfDraftAndNgram) {
  const char* env = std::getenv("SSD_MODEL");
  if (!env || !std::filesystem::exists(env))
    GTEST_SKIP() << "set SSD_MODEL to the default model's GGUF to run this test";
  Engine target(env, 2, 1024);
  const int64_t n = 24;
  std::vector<std::vector<int32_t>> ar;
  for (const auto& p : kChat)
    ar.push_back(test::saguaro::greedy_ar(*target.model, *target.kv, p, n));

  SsdDrafterOptions o;
  o.k = 4;
  o.fan_out.budget = 8;
  test::saguaro::SimOptions so;
  so.n_new = n;
  {
    ModelFile f = ModelFile::open(env);
    ModelDrafterOptions mo;
    mo.target_vocab = gguf_vocab(target.file);
    mo.draft_vocab = gguf_vocab(f);
    mo.target_logits = target.vocab();
    mo.kv_tokens = 2048;
    ModelDrafter self(std::move(f), *target.backend, mo);
    NgramDrafter backup(NgramOptions{});
    SsdDrafterCore core(self, &backup, o);
    const auto sim = test::saguaro::run_ssd(*target.model, *target.kv, core, kChat, so);
    EXPECT_EQ(sim.outputs, ar);
    EXPECT_GE(core.stats().hit_rate(), 0.8);
    print("self-draft", core.stats());
  }
  {
    NgramDrafter ngram(NgramOptions{}), backup(NgramOptions{});
    SsdDrafterCore core(ngram, &backup, o);
    const auto sim = test::saguaro::run_ssd(*target.model, *target.kv, core, kChat, so);
    EXPECT_EQ(sim.outputs, ar);
    print("n-gram", core.stats());
  }
}

}  // namespace
}  // namespace ssd
