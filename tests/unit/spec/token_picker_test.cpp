// The TokenPicker seam (runtime/generate/token_picker.h) on the CPU:
//   - HostTokenPicker is the code the loops ran before: sample == Sampler::sample, verify ==
//     verify_greedy / verify_sampling on the same rows (chains and branching trees), bit for bit;
//   - verify_greedy_argmax (what the device picker walks with) == verify_greedy, and reports a
//     NaN row as ssd::argmax does;
//   - the loops go through the target's picker: AR and SD (greedy and sampled, one request and a
//     batch) with a picker that asks for backend logits (on the CPU backend that memory is the
//     host's, so the test picker can read it) give exactly the host picker's output, and the
//     picker saw every decision; verify_round brings the rows to the host only when asked.
// Everything here is exact: the pickers run the same host functions on the same logits.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "runtime/core/error.h"
#include "runtime/drafters/model_drafter.h"
#include "runtime/generate/generation.h"
#include "runtime/generate/token_picker.h"
#include "runtime/spec/verify_round.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tiny_model.h"
#include "tests/unit/spec/drafting_fixture.h"

namespace ssd {
namespace {

using test::TempDir;
using test::drafting::Engine;

std::vector<float> random_rows(int64_t rows, int32_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.0f, 2.0f);
  std::vector<float> l(static_cast<size_t>(rows * vocab));
  for (float& x : l) x = g(rng);
  return l;
}

ForwardResult host_forward(std::vector<float> logits, int32_t vocab) {
  ForwardResult fr;
  fr.vocab = vocab;
  fr.rows = static_cast<int64_t>(logits.size()) / vocab;
  fr.logits = std::move(logits);
  return fr;
}

// q: a processed distribution of random logits that gives `token` some mass.
ProcessedDist q_with(int32_t token, int32_t vocab, uint32_t seed) {
  std::vector<float> l = random_rows(1, vocab, seed);
  l[static_cast<size_t>(token)] += 3.0f;
  return process(l.data(), vocab, SamplerConfig{1.0f, 20, 1.0f, 0.0f, 1});
}

const std::vector<SamplerConfig> kConfigs = {
    SamplerConfig{0.0f, 0, 1.0f, 0.0f, 1}, SamplerConfig{0.8f, 0, 1.0f, 0.0f, 2},
    SamplerConfig{1.0f, 20, 0.9f, 0.0f, 3}, SamplerConfig{0.6f, 0, 1.0f, 0.05f, 4}};

TEST(HostTokenPicker, SampleIsTheSampler) {
  const int32_t vocab = 97;
  const ForwardResult fr = host_forward(random_rows(5, vocab, 1), vocab);
  HostTokenPicker picker;
  EXPECT_FALSE(picker.reads_backend_logits());
  for (const SamplerConfig& cfg : kConfigs)
    for (size_t r = 0; r < 5; ++r)
      for (uint32_t step = 0; step < 4; ++step)
        EXPECT_EQ(picker.sample(fr, r, cfg, 7 + r, step),
                  Sampler(cfg).sample(fr.logits_row(r), vocab, 7 + r, step));
}

// One decode step's rows, each with its own config, stream and step: sample() row by row.
TEST(HostTokenPicker, SampleRowsIsSampleRowByRow) {
  const int32_t vocab = 97;
  const ForwardResult fr = host_forward(random_rows(6, vocab, 2), vocab);
  HostTokenPicker picker;
  std::vector<TokenPicker::RowDraw> draws;
  for (size_t r = 0; r < 6; ++r)
    draws.push_back({&kConfigs[r % kConfigs.size()], 30 + r, static_cast<uint32_t>(r * 3)});
  const std::vector<int32_t> got = picker.sample_rows(fr, draws);
  ASSERT_EQ(got.size(), 6u);
  for (size_t r = 0; r < 6; ++r)
    EXPECT_EQ(got[r], picker.sample(fr, r, *draws[r].cfg, draws[r].stream, draws[r].step)) << r;
  EXPECT_TRUE(picker.sample_rows(fr, {}).empty());
}

TEST(HostTokenPicker, VerifyIsTheVerifier) {
  const int32_t vocab = 53;
  // A chain and a tree (two children of the root, one grandchild), rows after 2 unrelated rows.
  DraftTree chain;
  for (int32_t i = 0; i < 4; ++i) chain.add(i - 1, 3 + 5 * i, q_with(3 + 5 * i, vocab, 10 + i));
  DraftTree tree;
  tree.add(-1, 4, q_with(4, vocab, 20));
  tree.add(-1, 9, q_with(9, vocab, 21));
  tree.add(0, 11, q_with(11, vocab, 22));
  HostTokenPicker picker;
  for (const DraftTree* t : {&chain, &tree}) {
    for (uint32_t seed = 0; seed < 6; ++seed) {
      std::vector<float> l = random_rows(2 + static_cast<int64_t>(t->size()) + 1, vocab, seed);
      // Make the first draft likely under the target, so that some rounds accept.
      l[static_cast<size_t>(2 * vocab + t->tokens[0])] += 4.0f * static_cast<float>(seed % 2);
      const ForwardResult fr = host_forward(l, vocab);
      for (const SamplerConfig& cfg : kConfigs) {
        const VerifyRng rng{cfg.seed + seed, 5, 40};
        const VerifyResult got = picker.verify(*t, fr, 2, cfg, rng);
        const VerifyResult want =
            is_greedy(cfg) ? verify_greedy(*t, fr.logits_row(2), vocab)
                           : verify_sampling(*t, fr.logits_row(2), vocab, cfg, rng);
        EXPECT_EQ(got.path, want.path);
        EXPECT_EQ(got.emitted, want.emitted);
        EXPECT_EQ(got.all_accepted, want.all_accepted);
      }
    }
  }
}

TEST(VerifyGreedyArgmax, EqualsVerifyGreedy) {
  const int32_t vocab = 31;
  DraftTree tree;
  tree.add(-1, 4, {});
  tree.add(-1, 9, {});
  tree.add(1, 11, {});
  tree.add(2, 2, {});
  for (uint32_t seed = 0; seed < 40; ++seed) {
    std::vector<float> l = random_rows(5, vocab, seed);
    // Steer some rows to the drafted tokens so that paths of every length occur.
    if (seed % 2) l[static_cast<size_t>(0 * vocab + 9)] += 9.0f;
    if (seed % 4 == 1) l[static_cast<size_t>(2 * vocab + 11)] += 9.0f;
    if (seed % 8 == 1) l[static_cast<size_t>(3 * vocab + 2)] += 9.0f;
    std::vector<int32_t> best(5);
    for (int32_t r = 0; r < 5; ++r) best[r] = argmax(l.data() + r * vocab, vocab);
    const VerifyResult got = verify_greedy_argmax(tree, best, vocab);
    const VerifyResult want = verify_greedy(tree, l.data(), vocab);
    EXPECT_EQ(got.path, want.path);
    EXPECT_EQ(got.emitted, want.emitted);
    EXPECT_EQ(got.all_accepted, want.all_accepted);
  }
  // A NaN row the walk reaches: ssd::argmax's message; one it does not reach: no error.
  std::vector<int32_t> best = {-1, 0, 0, 0, 0};
  EXPECT_THROW(
      {
        try {
          verify_greedy_argmax(tree, best, vocab);
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("all 31 logits are NaN"), std::string::npos);
          throw;
        }
      },
      Error);
  best = {5, -1, -1, -1, -1};  // the root's argmax matches no child: rows below are never read
  EXPECT_EQ(verify_greedy_argmax(tree, best, vocab).emitted, std::vector<int32_t>{5});
  EXPECT_THROW(verify_greedy_argmax(tree, std::vector<int32_t>{1, 2}, vocab), Error);
}

// A picker that asks for backend rows and reads them in place (the CPU backend's memory is the
// host's), delegating to the host picker; counts what it decided.
class BackendRowsPicker final : public TokenPicker {
 public:
  const char* name() const override { return "backend-rows"; }
  bool reads_backend_logits() const override { return true; }
  int32_t sample(const ForwardResult& fr, size_t row, const SamplerConfig& cfg, uint64_t stream,
                 uint32_t step) override {
    ++samples;
    backend_rows += fr.backend_logits ? 1 : 0;
    return host_.sample(as_host(fr), row, cfg, stream, step);
  }
  VerifyResult verify(const DraftTree& tree, const ForwardResult& fr, size_t first_row,
                      const SamplerConfig& cfg, const VerifyRng& rng) override {
    ++verifies;
    backend_rows += fr.backend_logits ? 1 : 0;
    return host_.verify(tree, as_host(fr), first_row, cfg, rng);
  }
  int64_t samples = 0, verifies = 0, backend_rows = 0;

 private:
  static ForwardResult as_host(const ForwardResult& fr) {
    ForwardResult h;
    h.vocab = fr.vocab;
    h.rows = fr.rows;
    if (fr.backend_logits)
      h.logits.assign(fr.backend_logits, fr.backend_logits + fr.rows * fr.vocab);
    else
      h.logits = fr.logits;
    return h;
  }
  HostTokenPicker host_;
};

struct World {
  TempDir tmp;
  std::string target_path, draft_path;
  std::unique_ptr<Engine> engine;
  World() {
    test::TinyModelSpec t = test::drafting::small_spec();
    target_path = test::write_tiny_gguf(t, tmp.file("target.gguf"));
    t.n_layers = 1;
    draft_path = test::write_tiny_gguf(t, tmp.file("draft.gguf"));
    engine = std::make_unique<Engine>(target_path, 1, 2048);
  }
  std::unique_ptr<Drafter> drafter() {
    ModelFile f = ModelFile::open(draft_path);
    ModelDrafterOptions o;
    o.target_vocab = test::drafting::gguf_vocab(engine->file);
    o.draft_vocab = test::drafting::gguf_vocab(f);
    o.target_logits = engine->vocab();
    return std::make_unique<ModelDrafter>(std::move(f), *engine->backend, o);
  }
};

std::vector<GenerationRequest> requests(const SamplerConfig& s) {
  std::vector<GenerationRequest> reqs;
  for (size_t i = 0; i < test::drafting::kPrompts.size(); ++i) {
    GenerationRequest r;
    r.prompt = test::drafting::kPrompts[i];
    r.max_new_tokens = 12 + 3 * static_cast<int64_t>(i);
    r.sampler = s;
    r.stream = 3 + i;
    reqs.push_back(r);
  }
  return reqs;
}

TEST(TokenPickerLoops, LocalTargetDefaultsToTheHostPicker) {
  World w;
  LocalTarget target(*w.engine->model, *w.engine->kv);
  EXPECT_STREQ(target.picker().name(), "host");
  BackendRowsPicker p;
  LocalTarget with(*w.engine->model, *w.engine->kv, &p);
  EXPECT_EQ(&with.picker(), &p);
}

TEST(TokenPickerLoops, ArAndSdThroughBackendRowsEqualTheHostPicker) {
  World w;
  for (const SamplerConfig& cfg : {kConfigs[0], kConfigs[2]}) {
    const std::vector<GenerationRequest> reqs = requests(cfg);
    LocalTarget host(*w.engine->model, *w.engine->kv);
    BackendRowsPicker p;
    LocalTarget rows(*w.engine->model, *w.engine->kv, &p);

    const auto ar_want = generate_ar_batch(host, reqs);
    const auto ar_got = generate_ar_batch(rows, reqs);
    int64_t tokens = 0;
    for (size_t i = 0; i < reqs.size(); ++i) {
      EXPECT_EQ(ar_got[i].tokens, ar_want[i].tokens) << "AR request " << i;
      tokens += static_cast<int64_t>(ar_got[i].tokens.size());
    }
    EXPECT_EQ(p.samples, tokens);                 // every token came from the picker
    EXPECT_EQ(p.backend_rows, tokens - 2);        // all but the prefills' from backend rows
    EXPECT_EQ(p.verifies, 0);

    auto d1 = w.drafter();
    auto d2 = w.drafter();
    const SdOptions opts{3, 1};
    const SdBatchResult sd_want = generate_sd_batch(host, *d1, reqs, opts);
    p.samples = p.verifies = p.backend_rows = 0;
    const SdBatchResult sd_got = generate_sd_batch(rows, *d2, reqs, opts);
    for (size_t i = 0; i < reqs.size(); ++i) {
      EXPECT_EQ(sd_got.requests[i].gen.tokens, sd_want.requests[i].gen.tokens) << "SD " << i;
      if (is_greedy(cfg)) {
        EXPECT_EQ(sd_got.requests[i].gen.tokens, ar_want[i].tokens) << "SD vs AR " << i;
      }
    }
    EXPECT_EQ(p.samples, 2);  // the first token of each request, from its prefill
    EXPECT_EQ(p.verifies, sd_got.stats.rounds);
    EXPECT_EQ(p.backend_rows, sd_got.stats.rounds);
  }
}

TEST(TokenPickerLoops, VerifyRoundDownloadsRowsOnlyWhenAsked) {
  World w;
  BackendRowsPicker p;
  LocalTarget target(*w.engine->model, *w.engine->kv, &p);
  const std::vector<int32_t> prompt = test::drafting::kPrompts[0];
  for (const bool host_logits : {false, true}) {
    TargetSeqs seqs(target);
    const SeqId s = seqs.create();
    target.forward(Batch::sequence(s, {prompt.begin(), prompt.end() - 1}, 0));
    const DraftTree chain = DraftTree::chain({4, 5});
    VerifyInput in;
    in.kv_seq = s;
    in.root = prompt.back();
    in.root_pos = static_cast<int32_t>(prompt.size()) - 1;
    in.tree = &chain;
    const VerifyRoundResult r = verify_round(target, {&in, 1}, {}, host_logits);
    EXPECT_EQ(r.logits(0) != nullptr, host_logits);
    EXPECT_EQ(r.forward.backend_logits == nullptr, host_logits);  // downloaded when asked
    if (host_logits) {
      EXPECT_EQ(r.forward.logits.size(), 3u * static_cast<size_t>(w.engine->vocab()));
    }
  }
}

}  // namespace
}  // namespace ssd
