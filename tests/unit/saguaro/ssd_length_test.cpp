// Speculation lengths chosen by the target leader (--k auto) on the drafter side
// (SsdDrafterCore, tests/unit/saguaro/ssd_sim.h's in-process loop), and the SD baseline's plain
// path:
//   - SSD answers cut to the length the outcome asks for (0..K, varied per sequence and round):
//     greedy output still equals AR token for token with the n-gram and the self-drafting model,
//     every answer is at most that long, and the cache still hits (branches keep drafting K);
//   - the plain core (SD on a drafter rank) answers with exactly the draft single-process SD gets
//     from the same drafter for the same context, sampled (tokens and q), of the requested length;
//     a length of 0 drafts nothing; it asks for no ranking (no predicted lists);
//   - branches are pre-speculated to the length just asked + 1 (+ 1 for the ranking), K at most;
//   - under SSD a length of 0 is a plain decode step: no lookup, no draft (not even the ranking
//     token), no branch planned after it, for that sequence only; the next length > 0 is a miss.
#include <gtest/gtest.h>

#include "runtime/drafters/model_drafter.h"
#include "runtime/drafters/ngram_drafter.h"
#include "tests/support/temp_dir.h"
#include "tests/unit/saguaro/ssd_sim.h"
#include "tests/unit/spec/drafting_fixture.h"

namespace ssd {
namespace {

using test::drafting::Engine;
using test::drafting::gguf_vocab;

struct World {
  test::TempDir tmp;
  std::string path;
  std::unique_ptr<Engine> target;
  World() {
    path = test::write_tiny_gguf(test::drafting::small_spec(), tmp.file("target.gguf"));
    target = std::make_unique<Engine>(path, 1, 4096);
  }
  std::unique_ptr<ModelDrafter> self() {
    ModelFile f = ModelFile::open(path);
    ModelDrafterOptions o;
    o.target_vocab = gguf_vocab(target->file);
    o.draft_vocab = gguf_vocab(f);
    o.target_logits = target->vocab();
    return std::make_unique<ModelDrafter>(std::move(f), *target->backend, o);
  }
};

// Counts the tokens each draft() call asks for.
class Counting final : public Drafter {
 public:
  explicit Counting(Drafter& inner) : inner_(inner) {}
  std::string name() const override { return inner_.name(); }
  void start(int32_t seq, std::span<const int32_t> p) override { inner_.start(seq, p); }
  void commit(int32_t seq, std::span<const int32_t> t) override { inner_.commit(seq, t); }
  void finish(int32_t seq) override { inner_.finish(seq); }
  std::vector<DraftTree> draft(std::span<const DraftRequest> r) override {
    for (const DraftRequest& q : r) asked.push_back(q);
    return inner_.draft(r);
  }
  std::vector<DraftRequest> asked;

 private:
  Drafter& inner_;
};

TEST(SsdLength, AnswersCutToTheAskedLengthStayExact) {
  World w;
  const std::vector<std::vector<int32_t>> prompts = {test::drafting::kPrompts[0],
                                                     {33, 34, 35, 36, 33, 34, 35, 2, 250}};
  constexpr int32_t K = 4;
  std::vector<std::vector<int32_t>> ar;
  for (const auto& p : prompts)
    ar.push_back(test::saguaro::greedy_ar(*w.target->model, *w.target->kv, p, 40));
  auto model = w.self();
  NgramDrafter ngram(NgramOptions{});
  for (Drafter* d : std::initializer_list<Drafter*>{&ngram, model.get()}) {
    SCOPED_TRACE(d->name());
    SsdDrafterOptions o;
    o.k = K;
    o.fan_out.budget = 6;
    SsdDrafterCore core(*d, nullptr, o);
    std::map<int32_t, int32_t> asked;  // the length each sequence's current speculation may have
    int64_t longest = 0, too_long = 0;
    test::saguaro::SimOptions so;
    so.next_k = [&](int32_t seq, int64_t round) {
      const int32_t k = static_cast<int32_t>((round * 3 + seq) % (K + 1));
      asked[seq] = k;
      return k;
    };
    so.mirror = [&](std::span<const RoundOutcome>, std::span<const Speculation> next) {
      for (const Speculation& s : next) {
        const int64_t n = static_cast<int64_t>(s.tokens.size());
        too_long += n > asked.at(s.seq) ? 1 : 0;
        longest = std::max(longest, n);
        EXPECT_EQ(s.q.size(), s.tokens.size());
      }
    };
    const auto sim = test::saguaro::run_ssd(*w.target->model, *w.target->kv, core, prompts, so);
    for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(sim.outputs[i], ar[i]) << "prompt " << i;
    EXPECT_EQ(too_long, 0) << "an answer longer than the length asked";
    EXPECT_GE(longest, 2) << "the lengths asked were used";
    if (d == model.get()) EXPECT_GT(core.stats().hits, 0) << "cut cache entries still hit";
  }
}

TEST(SsdLength, PlainCoreDraftsWhatSingleProcessSdDrafts) {
  World w;
  SamplerConfig s;
  s.temperature = 0.8f;
  s.seed = 9;
  auto inner = w.self();
  Counting counted(*inner);
  auto reference = w.self();  // the drafter single-process SD would hold
  SsdDrafterOptions o;
  o.k = 5;
  o.sampler = s;
  o.plain = true;
  o.saguaro_c = 0.5;  // ignored by the plain path
  SsdDrafterCore core(counted, nullptr, o);
  const std::vector<int32_t> prompt = test::drafting::kPrompts[0];
  std::vector<int32_t> context = {prompt.front()};  // emitted so far (the first token)
  core.start(0, prompt, context, /*stream=*/4);
  reference->start(0, prompt);
  reference->commit(0, context);

  auto sd_draft = [&](int32_t k) {
    DraftRequest r;  // as sd_generation.cpp asks
    r.seq = 0;
    r.k = k;
    r.sampler = s;
    r.stream = 4;
    r.position = static_cast<uint32_t>(context.size());
    return reference->draft({&r, 1}).at(0);
  };
  const std::vector<int32_t> ks = {3, 0, 5, 1};
  Speculation spec = core.first_speculations(std::vector<int32_t>{0}, {&ks[0], 1}).at(0);
  for (size_t round = 0;; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    const DraftTree want = sd_draft(ks[round]);
    ASSERT_EQ(spec.tokens.size(), static_cast<size_t>(ks[round]));
    EXPECT_EQ(spec.tokens, want.tokens);
    ASSERT_EQ(spec.q.size(), want.q.size());
    for (size_t j = 0; j < spec.q.size(); ++j) {
      ASSERT_EQ(spec.q[j].tokens.size(), want.q[j].tokens.size());
      for (size_t t = 0; t < spec.q[j].tokens.size(); ++t) {
        EXPECT_EQ(spec.q[j].tokens[t].id, want.q[j].tokens[t].id);
        EXPECT_EQ(spec.q[j].tokens[t].prob, want.q[j].tokens[t].prob);  // the same computation
      }
    }
    EXPECT_TRUE(spec.predicted.empty()) << "no ranking asked";
    if (round + 1 == ks.size()) break;
    // The target accepts nothing and emits token 7: commit it on both sides.
    RoundOutcome out{0, 0, {7}};
    out.next_k = ks[round + 1];
    context.push_back(7);
    reference->commit(0, std::vector<int32_t>{7});
    spec = core.on_outcome({&out, 1}).at(0);
  }
  for (const DraftRequest& r : counted.asked) {
    EXPECT_GT(r.k, 0) << "a length of 0 drafts nothing";
    EXPECT_EQ(r.predict_top, 0);
    EXPECT_TRUE(r.saguaro_top_f.empty());
  }
  EXPECT_EQ(counted.asked.size(), 3u);
}

TEST(SsdLength, PreSpeculationDraftsToTheAskedLengthPlusOne) {
  World w;
  auto inner = w.self();
  Counting counted(*inner);
  SsdDrafterOptions o;
  o.k = 6;
  o.fan_out.budget = 6;
  SsdDrafterCore core(counted, nullptr, o);
  core.start(0, test::drafting::kPrompts[0], std::vector<int32_t>{7}, 0);
  auto branch_lengths = [&] {  // the k of every pre-speculation request (depth + the ranking)
    counted.asked.clear();
    core.prespeculate();
    std::vector<int32_t> ks;
    for (const DraftRequest& r : counted.asked) ks.push_back(r.k);
    return ks;
  };
  const std::vector<int32_t> two = {2};
  const Speculation first = core.first_speculations(std::vector<int32_t>{0}, two).at(0);
  ASSERT_EQ(first.tokens.size(), 2u);
  EXPECT_EQ(first.asked, 2);
  std::vector<int32_t> ks = branch_lengths();
  ASSERT_FALSE(ks.empty());
  for (int32_t k : ks) EXPECT_EQ(k, 2 + SsdDrafterCore::kDepthMargin + 1);
  // The full K asked (the fixed --k sends -1): branches draft K + 1, as before lengths existed.
  RoundOutcome out{0, 2, {first.tokens[0], first.tokens[1], 9}};
  out.next_k = -1;
  const Speculation next = core.on_outcome({&out, 1}).at(0);
  EXPECT_EQ(next.asked, 6);
  ks = branch_lengths();
  ASSERT_FALSE(ks.empty());
  for (int32_t k : ks) EXPECT_EQ(k, 7);
}

TEST(SsdLength, DecodeStepDraftsAndPlansNothing) {
  World w;
  auto inner = w.self();
  Counting counted(*inner);
  SsdDrafterOptions o;
  o.k = 4;
  o.fan_out.budget = 6;
  SsdDrafterCore core(counted, nullptr, o);
  core.start(0, test::drafting::kPrompts[0], std::vector<int32_t>{7}, 0);
  core.start(1, test::drafting::kPrompts[1], std::vector<int32_t>{9}, 1);

  // Round 0: sequence 0 at length 0, sequence 1 at 2.
  const std::vector<int32_t> first = {0, 2};
  std::vector<Speculation> next = core.first_speculations(std::vector<int32_t>{0, 1}, first);
  EXPECT_TRUE(next[0].decode_step());
  EXPECT_TRUE(next[0].tokens.empty() && next[0].predicted.empty());
  EXPECT_EQ(next[1].tokens.size(), 2u);
  ASSERT_EQ(counted.asked.size(), 1u) << "one draft, for sequence 1";
  EXPECT_EQ(counted.asked[0].seq, 1);
  std::vector<Branch> plan = core.plan_branches();
  EXPECT_FALSE(plan.empty());
  for (const Branch& b : plan) EXPECT_EQ(b.seq, 1) << "nothing is planned after a decode step";
  core.prespeculate();
  counted.asked.clear();

  // Round 1: both at length 0. No lookup, no draft, no plan.
  std::vector<RoundOutcome> outs(2);
  outs[0] = RoundOutcome{0, 0, {11}};
  outs[0].next_k = 0;
  outs[1] = RoundOutcome{1, 2, {next[1].tokens[0], next[1].tokens[1], 13}};
  outs[1].next_k = 0;
  const int64_t lookups = core.stats().hits + core.stats().misses;
  next = core.on_outcome(outs);
  EXPECT_TRUE(next[0].decode_step());
  EXPECT_TRUE(next[1].decode_step());
  EXPECT_TRUE(counted.asked.empty()) << "a decode step drafts nothing";
  EXPECT_EQ(core.stats().hits + core.stats().misses, lookups) << "nor looks anything up";
  EXPECT_TRUE(core.plan_branches().empty());
  core.prespeculate();
  EXPECT_TRUE(counted.asked.empty());

  // Round 2: sequence 0 asks 3 tokens: a miss (nothing was pre-speculated), a fallback draft.
  outs[0] = RoundOutcome{0, 0, {12}};
  outs[0].next_k = 3;
  outs[1] = RoundOutcome{1, 0, {14}};
  outs[1].next_k = 0;
  next = core.on_outcome(outs);
  EXPECT_EQ(next[0].source, SpecSource::kPrimary);
  EXPECT_EQ(next[0].tokens.size(), 3u);
  EXPECT_TRUE(next[1].decode_step());
  EXPECT_EQ(core.stats().misses, 1);
  ASSERT_EQ(counted.asked.size(), 1u);
  EXPECT_EQ(counted.asked[0].seq, 0);
  for (const Branch& b : core.plan_branches()) EXPECT_EQ(b.seq, 0);
}

}  // namespace
}  // namespace ssd
