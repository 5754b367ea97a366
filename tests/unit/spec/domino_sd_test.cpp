// The Domino drafter inside the SD loop: greedy SD output == AR output token for token, head on
// and off, for K in {3, 7} (and K = 9 > B - 1, where the drafter caps its depth at 7) with block
// 8 on a tiny target; the drafter's context cache follows the features the loop delivers (one
// entry per verified position, none left behind by drafts); seeded sampled runs repeat exactly.
// Plus one short greedy SD == AR run on the real default model with a random Domino checkpoint
// generated in the test's temp dir (env SSD_MODEL; skipped visibly without it).
//
// There are no tolerances here: SD must reproduce AR's tokens exactly whatever the drafter
// proposes (a random checkpoint drafts mostly rejected tokens; acceptance is printed, not asserted).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "runtime/drafters/domino/domino_drafter.h"
#include "tests/support/domino_writer.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tiny_model.h"
#include "tests/unit/spec/drafting_fixture.h"

namespace ssd {
namespace {

using test::TempDir;
using test::drafting::Engine;
using test::drafting::kPrompts;

struct World {
  TempDir tmp;
  std::unique_ptr<Engine> target;
  std::string path;
  World() {
    target = std::make_unique<Engine>(
        test::write_tiny_gguf(test::tiny_spec(Arch::Llama, DType::F32), tmp.file("t.gguf")), 2);
    path = test::write_domino(test::tiny_domino_spec(), tmp.file("d.safetensors"));
  }
  std::unique_ptr<DominoDrafter> drafter(bool head) {
    DominoOptions o;
    o.path = path;
    o.head = head;
    return std::make_unique<DominoDrafter>(*target->model, o);
  }
};

// Checks, at every draft, that the drafter holds context entries for exactly the positions the
// loop has verified: all emitted tokens but the root (features lag the tokens by one); its cache
// takes the waiting ones when the draft needs them.
class ContextCheckingDrafter final : public Drafter {
 public:
  explicit ContextCheckingDrafter(DominoDrafter& d) : d_(d) {}
  std::string name() const override { return d_.name(); }
  std::vector<int32_t> target_feature_layers() const override { return d_.target_feature_layers(); }
  void start(int32_t seq, std::span<const int32_t> p) override {
    tokens_ = static_cast<int64_t>(p.size());
    d_.start(seq, p);
  }
  void commit(int32_t seq, std::span<const int32_t> t) override {
    tokens_ += static_cast<int64_t>(t.size());
    d_.commit(seq, t);
  }
  void set_features(int32_t seq, int64_t from, std::span<const float> f) override {
    d_.set_features(seq, from, f);
  }
  std::vector<DraftTree> draft(std::span<const DraftRequest> r) override {
    EXPECT_EQ(d_.context_entries(r[0].seq), tokens_ - 1);
    std::vector<DraftTree> trees = d_.draft(r);
    if (r[0].k > 0) EXPECT_EQ(d_.kv_cache().length(0), tokens_ - 1);  // its only sequence
    ++drafts;
    return trees;
  }
  void finish(int32_t seq) override { d_.finish(seq); }
  int64_t drafts = 0;

 private:
  DominoDrafter& d_;
  int64_t tokens_ = 0;
};

struct Case {
  bool head;
  int32_t k;
};
std::string case_name(const testing::TestParamInfo<Case>& p) {
  return std::string(p.param.head ? "HeadOn" : "HeadOff") + "_K" + std::to_string(p.param.k);
}

class DominoGreedy : public testing::TestWithParam<Case> {};

TEST_P(DominoGreedy, SdEqualsAr) {
  World w;
  auto d = w.drafter(GetParam().head);
  ContextCheckingDrafter checked(*d);
  int64_t accepted = 0;
  for (const auto& prompt : kPrompts) {
    const auto ar = w.target->ar(prompt, 40);
    const auto sd = w.target->sd(checked, prompt, 40, GetParam().k, 1);
    EXPECT_EQ(sd.gen.tokens, ar.tokens);
    EXPECT_LE(sd.stats.drafted, sd.stats.rounds * std::min(GetParam().k, 7));
    accepted += sd.stats.accepted;
  }
  EXPECT_GT(checked.drafts, 0);
  std::cout << "  accepted draft tokens over both prompts: " << accepted << "\n";
}

INSTANTIATE_TEST_SUITE_P(Domino, DominoGreedy,
                         testing::Values(Case{true, 3}, Case{true, 7}, Case{false, 3},
                                         Case{false, 7}, Case{true, 9}),
                         case_name);

TEST(DominoSampling, SeededRunsRepeat) {
  World w;
  SamplerConfig s;
  s.temperature = 0.9f;
  s.top_k = 40;
  s.seed = 77;
  std::vector<int32_t> first;
  for (int run = 0; run < 2; ++run) {
    auto d = w.drafter(true);
    const auto sd = w.target->sd(*d, kPrompts[0], 30, 4, 1, s, /*stream=*/5);
    EXPECT_EQ(sd.gen.tokens.size(), 30u);
    if (run == 0) first = sd.gen.tokens;
    else EXPECT_EQ(sd.gen.tokens, first);
  }
}

// The real default model with a random Domino checkpoint of its size (d 576, vocab 49152; small
// rank and GRU keep the file ~7 MB in BF16 and quick to write).
TEST(DominoRealModel, GreedySdEqualsAr) {
  const char* env = std::getenv("SSD_MODEL");
  if (!env || !std::filesystem::exists(env))
    GTEST_SKIP() << "set SSD_MODEL to the default model's GGUF to run this test";
  Engine target(env, 2, 512);
  TempDir tmp;
  test::DominoSpec spec;
  DominoConfig& c = spec.cfg;
  c.block_size = 8;
  c.n_layers = 1;
  c.n_heads = 9;
  c.n_kv_heads = 3;
  c.head_dim = 64;
  c.ffn_dim = 512;
  c.target_layers = {3, 15, 27};
  c.gru_dim = 32;
  c.rank = 16;
  c.rms_eps = 1e-5f;
  c.rope_theta = 100000.0f;
  c.target_dim = 576;
  c.target_vocab = 49152;
  spec.type = DType::BF16;
  DominoOptions o;
  o.path = test::write_domino(spec, tmp.file("domino.safetensors"));
  DominoDrafter d(*target.model, o);
  // Token ids of two short SmolLM2 chat prompts (a question and a code request).
  const std::vector<std::vector<int32_t>> prompts = {
      {1, 4093, 198, 1780, 314, 260, 3575, 282, 4649, 47, 2, 198, 1, 520, 9531, 198},
      {1, 4093, 198, 17387, 253, 1789, 2433, 338, 1565, 6326, 253, 1345, 30, 2, 198, 1, 520,
       9531, 198},
  };
  for (const auto& prompt : prompts) {
    const auto ar = target.ar(prompt, 32);
    const auto sd = target.sd(d, prompt, 32, 4, 1);
    EXPECT_EQ(sd.gen.tokens, ar.tokens);
    std::cout << "  rounds " << sd.stats.rounds << ", mean acceptance length "
              << sd.stats.mean_acceptance_length() << ", draft " << sd.stats.draft_s
              << " s, verify " << sd.stats.verify_s << " s\n";
  }
}

}  // namespace
}  // namespace ssd
