// One verification round over several sequences (verify_round.h) on a tiny random model: the
// batch layout (rows, positions, block-diagonal tree masks) written out by hand; a round over
// three sequences (an AR step, an accepted chain, a branching tree) equals the same sequences
// verified one per round (accepted paths and emitted tokens, logits rows, features, and the
// compacted caches, seen through the next forward), greedy and sampled; bad inputs are refused
// before the forward, and a verification error leaves every cache as it was.
//
// Tolerances: rows of one batched forward vs single-sequence forwards, logits and hidden states:
// 2e-5 relative (the engine's bound for differently grouped float32 sums,
// tests/unit/engine/transformer_test.cpp). Decisions (paths, tokens) are compared exactly: the
// greedy drafts below are built from the target's own argmaxes or from tokens far from them.
#include <gtest/gtest.h>

#include "runtime/backend/backend.h"
#include "runtime/core/error.h"
#include "runtime/generate/generation.h"
#include "runtime/spec/verify_round.h"
#include "tests/support/rel_err.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tiny_model.h"
#include "tests/unit/spec/drafting_fixture.h"

namespace ssd {
namespace {

using test::rel_err;
using test::TempDir;
using test::drafting::Engine;

TEST(VerifyBatch, RowsPositionsAndBlockDiagonalMask) {
  const DraftTree empty;
  const DraftTree chain = DraftTree::chain({1, 2});
  DraftTree tree;  // n0 and n1 children of the root, n2 child of n0
  tree.add(-1, 10, one_hot(10));
  tree.add(-1, 11, one_hot(11));
  tree.add(0, 12, one_hot(12));
  std::vector<VerifyInput> in(3);
  in[0] = {.kv_seq = 4, .root = 5, .root_pos = 9, .tree = &empty};
  in[1] = {.kv_seq = 2, .root = 7, .root_pos = 4, .tree = &chain};
  in[2] = {.kv_seq = 8, .root = 3, .root_pos = 6, .tree = &tree};
  const Batch b = verify_batch(in, {1});
  EXPECT_EQ(b.tokens, (std::vector<int32_t>{5, 7, 1, 2, 3, 10, 11, 12}));
  EXPECT_EQ(b.positions, (std::vector<int32_t>{9, 4, 5, 6, 6, 7, 7, 8}));
  EXPECT_EQ(b.seqs, (std::vector<SeqId>{4, 2, 2, 2, 8, 8, 8, 8}));
  EXPECT_EQ(b.logits_rows, (std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(b.hidden_layers, (std::vector<int32_t>{1}));
  const std::vector<uint8_t> want = {
      1, 0, 0, 0, 0, 0, 0, 0,  // seq 4: its root alone
      0, 1, 0, 0, 0, 0, 0, 0,  // seq 2: root
      0, 1, 1, 0, 0, 0, 0, 0,  //   chain 1
      0, 1, 1, 1, 0, 0, 0, 0,  //   chain 2
      0, 0, 0, 0, 1, 0, 0, 0,  // seq 8: root
      0, 0, 0, 0, 1, 1, 0, 0,  //   n0
      0, 0, 0, 0, 1, 0, 1, 0,  //   n1 (not its sibling n0)
      0, 0, 0, 0, 1, 1, 0, 1,  //   n2 below n0
  };
  EXPECT_EQ(b.mask, want);
}

// Three sequences with their prompts in the cache and the last prompt token as the root.
struct Fixture {
  TempDir tmp;
  std::unique_ptr<Engine> e;
  std::unique_ptr<LocalTarget> target;
  std::vector<std::vector<int32_t>> prompts = {
      {5, 77, 258, 1, 140, 33, 200, 9, 101}, {260, 12, 12, 99, 4, 180, 65}, {17, 3, 250, 8}};
  std::vector<SeqId> seqs;
  Fixture() {
    e = std::make_unique<Engine>(
        test::write_tiny_gguf(test::drafting::small_spec(), tmp.file("t.gguf")));
    target = std::make_unique<LocalTarget>(*e->model, *e->kv);
  }
  // Prefills every prompt but its last token (the root) on fresh sequences.
  void start() {
    seqs.clear();
    for (const auto& p : prompts) {
      seqs.push_back(target->create_seq());
      target->forward(Batch::sequence(seqs.back(), {p.begin(), p.end() - 1}, 0));
    }
  }
  // The target's greedy continuation of prompt i (its AR tokens, the first from the prompt).
  std::vector<int32_t> greedy(size_t i, int64_t n) {
    GenerationRequest r;
    r.prompt = prompts[i];
    r.max_new_tokens = n;
    return generate_ar(*target, r).tokens;
  }
  VerifyInput input(size_t i, const DraftTree* t, const SamplerConfig& s = {}) const {
    return VerifyInput{seqs[i], prompts[i].back(), static_cast<int32_t>(prompts[i].size()) - 1,
                       t,       s,                 /*stream=*/40 + i,
                       /*step=*/3};
  }
};

// Trees: an AR step for sequence 0, the target's own 3-token continuation for sequence 1 (all
// accepted, plus the bonus), and for sequence 2 a wrong first child before the right one, whose
// own child is wrong (accept 1, then a correction).
std::vector<DraftTree> trees_for(Fixture& f) {
  const auto g1 = f.greedy(1, 4);
  const auto g2 = f.greedy(2, 2);
  std::vector<DraftTree> t(3);
  t[1] = DraftTree::chain({g1[0], g1[1], g1[2]});
  const int32_t wrong = (g2[0] + 97) % 261, wrong2 = (g2[1] + 31) % 261;
  t[2].add(-1, wrong, one_hot(wrong));
  t[2].add(-1, g2[0], one_hot(g2[0]));
  t[2].add(1, wrong2, one_hot(wrong2));
  return t;
}

void expect_round_equals_single_rounds(const SamplerConfig& s) {
  Fixture batched, single;
  const std::vector<DraftTree> trees = trees_for(batched);
  const std::vector<int32_t> layers = {0, 1};
  batched.start();
  single.start();
  std::vector<VerifyInput> in;
  for (size_t i = 0; i < 3; ++i) in.push_back(batched.input(i, &trees[i], s));
  const VerifyRoundResult round = verify_round(*batched.target, in, layers);
  ASSERT_EQ(round.seqs.size(), 3u);
  EXPECT_EQ(round.rows, 1 + (1 + 3) + (1 + 3));
  EXPECT_GT(round.forward_s, 0);

  const int32_t vocab = batched.e->vocab();
  for (size_t i = 0; i < 3; ++i) {
    const VerifyInput one = single.input(i, &trees[i], s);
    const VerifyRoundResult alone = verify_round(*single.target, {&one, 1}, layers);
    const VerifyOutput& got = round.seqs[i];
    const VerifyOutput& want = alone.seqs[0];
    EXPECT_EQ(got.result.path, want.result.path) << "sequence " << i;
    EXPECT_EQ(got.result.emitted, want.result.emitted) << "sequence " << i;
    EXPECT_EQ(got.rows, want.rows);
    EXPECT_LT(rel_err(round.logits(i), alone.logits(0), static_cast<size_t>(got.rows) * vocab),
              2e-5);
    ASSERT_EQ(got.features.size(), want.features.size());
    ASSERT_EQ(got.features.size(), (1 + got.result.path.size()) * 2 * 128);
    EXPECT_LT(rel_err(got.features, want.features), 2e-5);
    // The compacted cache: root + path, and the next forward sees the same context.
    const int32_t len = in[i].root_pos + 1 + got.result.accepted();
    EXPECT_EQ(batched.target->seq_length(in[i].kv_seq), len);
    const int32_t next = got.result.emitted.back();
    const auto a = batched.target->forward(Batch::sequence(in[i].kv_seq, {next}, len));
    const auto b = single.target->forward(Batch::sequence(one.kv_seq, {next}, len));
    EXPECT_LT(rel_err(a.logits_row(0), b.logits_row(0), vocab), 2e-5) << "sequence " << i;
  }
  if (s.temperature == 0) {  // the decisions the trees were built for
    EXPECT_TRUE(round.seqs[0].result.path.empty());
    EXPECT_EQ(round.seqs[0].result.emitted, batched.greedy(0, 1));
    EXPECT_EQ(round.seqs[1].result.accepted(), 3);
    EXPECT_TRUE(round.seqs[1].result.all_accepted);
    EXPECT_EQ(round.seqs[1].result.emitted, batched.greedy(1, 4));
    EXPECT_EQ(round.seqs[2].result.path, (std::vector<int32_t>{1}));
    EXPECT_EQ(round.seqs[2].result.emitted, batched.greedy(2, 2));
  } else {  // an empty tree is the very draw plain sampling makes at that step
    EXPECT_EQ(round.seqs[0].result.emitted.front(),
              Sampler(s).sample(round.logits(0), vocab, in[0].stream, in[0].step));
  }
}

TEST(VerifyRound, GreedyEqualsOneSequencePerRound) {
  expect_round_equals_single_rounds(SamplerConfig{});
}

TEST(VerifyRound, SampledEqualsOneSequencePerRound) {
  expect_round_equals_single_rounds(SamplerConfig{.temperature = 1.0f, .top_k = 8, .seed = 9});
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(VerifyRound, BadInputsAreRefusedBeforeTheForward) {
  Fixture f;
  f.start();
  const DraftTree chain = DraftTree::chain({1, 2});
  std::vector<VerifyInput> in = {f.input(0, &chain), f.input(1, nullptr)};
  in[1].root_pos += 1;
  EXPECT_NE(error_of([&] { verify_round(*f.target, in); })
                .find("sequence " + std::to_string(in[1].kv_seq) + " holds 6 positions but its "
                      "root is at position 7"),
            std::string::npos);
  in[1] = f.input(0, nullptr);
  EXPECT_NE(error_of([&] { verify_round(*f.target, in); }).find("appears twice"),
            std::string::npos);
  const DraftTree bad = DraftTree::chain({1, 999});
  in[1] = f.input(1, &bad);
  EXPECT_NE(error_of([&] { verify_round(*f.target, in); }), "");
  EXPECT_NE(error_of([&] { verify_round(*f.target, {}); }).find("no sequences"),
            std::string::npos);
  for (size_t i = 0; i < 3; ++i)
    EXPECT_EQ(f.target->seq_length(f.seqs[i]), static_cast<int64_t>(f.prompts[i].size()) - 1);
}

// A draft whose q does not sum to 1 fails verification after the forward: every sequence of the
// round is rolled back, including the one verified before it.
TEST(VerifyRound, AVerificationErrorLeavesEveryCacheAsItWas) {
  Fixture f;
  f.start();
  const SamplerConfig s{.temperature = 1.0f, .seed = 2};
  const DraftTree fine = DraftTree::chain({4, 5});
  DraftTree broken;
  ProcessedDist q = one_hot(6);
  q.tokens[0].prob = 0.5;  // sums to 0.5
  broken.add(-1, 6, q);
  const std::vector<VerifyInput> in = {f.input(0, &fine, s), f.input(1, &broken, s)};
  EXPECT_THROW(verify_round(*f.target, in), Error);
  for (size_t i = 0; i < 3; ++i)
    EXPECT_EQ(f.target->seq_length(f.seqs[i]), static_cast<int64_t>(f.prompts[i].size()) - 1);
}

}  // namespace
}  // namespace ssd
