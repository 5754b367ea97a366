// SsdDrafterCore against real verification, in one process (tests/unit/saguaro/ssd_sim.h): the
// target Transformer verifies each speculation, the core answers outcomes from its speculation
// cache or a fallback and pre-speculates for the next round.
//   - greedy SSD output == greedy AR output token for token, for K in {2, 4}, constant and
//     geometric fan-out, drafters n-gram and model (the target drafting for itself), batch 1 and 3;
//   - the self-drafting model at temperature 0 hits the cache almost always (>= 90% of rounds:
//     the draft's top token at position K is the target's bonus up to float near-ties between
//     batch shapes, so misses are rare; 0.9 leaves room for a few);
//   - misses through both fallbacks (b* forced to 0 and to 1000) stay exact and are counted;
//   - per-position lists after a hit / after a miss are what the speculations carry;
//   - two drafter cores splitting the branches (lead + a secondary that adopts the lead's answers)
//     give the same output, with hits served from both halves; the secondary, which only adopts
//     the lead's answers, plans the same branches as the lead after the lead's a_p has moved;
//   - a pre-speculation cut short (only some of the planned branches drafted) stays exact; the
//     plan lists the likeliest branches first, so drafting its head keeps most hits and drafting
//     its tail loses them; equal weights are served round-robin over the sequences; the figures
//     count planned, cached and cut;
//   - seeded sampled SSD with Saguaro sampling repeats exactly; bad outcomes are refused.
#include <gtest/gtest.h>

#include <numeric>
#include <set>
#include <tuple>

#include "runtime/core/error.h"
#include "runtime/drafters/model_drafter.h"
#include "runtime/drafters/ngram_drafter.h"
#include "tests/support/temp_dir.h"
#include "tests/unit/saguaro/ssd_sim.h"
#include "tests/unit/spec/drafting_fixture.h"

namespace ssd {
namespace {

using test::TempDir;
using test::drafting::Engine;
using test::drafting::gguf_vocab;
using test::saguaro::greedy_ar;
using test::saguaro::run_ssd;
using test::saguaro::SimOptions;

const std::vector<std::vector<int32_t>> kPrompts = {
    test::drafting::kPrompts[0],
    test::drafting::kPrompts[1],
    {33, 34, 35, 36, 33, 34, 35, 2, 250},
};

struct World {
  TempDir tmp;
  std::string target_path, small_path;
  std::unique_ptr<Engine> target;
  World() {
    test::TinyModelSpec t = test::drafting::small_spec();
    target_path = test::write_tiny_gguf(t, tmp.file("target.gguf"));
    test::TinyModelSpec d = t;
    d.n_layers = 1;
    small_path = test::write_tiny_gguf(d, tmp.file("draft.gguf"));
    target = std::make_unique<Engine>(target_path, 1, 4096);
  }
  std::unique_ptr<ModelDrafter> model(const std::string& path) {
    ModelFile f = ModelFile::open(path);
    ModelDrafterOptions o;
    o.target_vocab = gguf_vocab(target->file);
    o.draft_vocab = gguf_vocab(f);
    o.target_logits = target->vocab();
    return std::make_unique<ModelDrafter>(std::move(f), *target->backend, o);
  }
  std::vector<std::vector<int32_t>> ar(size_t batch, int64_t n) {
    std::vector<std::vector<int32_t>> out;
    for (size_t i = 0; i < batch; ++i)
      out.push_back(greedy_ar(*target->model, *target->kv, kPrompts[i], n));
    return out;
  }
};

std::vector<std::vector<int32_t>> first(size_t n) {
  return {kPrompts.begin(), kPrompts.begin() + static_cast<std::ptrdiff_t>(n)};
}

void expect_consistent(const SsdDrafterStats& st, int32_t k) {
  EXPECT_EQ(st.hits + st.misses, st.rounds);
  EXPECT_EQ(std::accumulate(st.hits_at_k.begin(), st.hits_at_k.end(), int64_t{0}), st.hits);
  EXPECT_EQ(std::accumulate(st.outcomes_at_k.begin(), st.outcomes_at_k.end(), int64_t{0}),
            st.rounds);
  EXPECT_EQ(st.fallback_primary + st.fallback_backup, st.misses);
  EXPECT_EQ(st.outcomes_at_k.size(), static_cast<size_t>(k) + 1);
}

enum class Kind { kNgram, kSelf };
struct Case {
  Kind kind;
  int32_t k;
  FanOutMode mode;
  size_t batch;
};
std::string case_name(const testing::TestParamInfo<Case>& p) {
  return std::string(p.param.kind == Kind::kNgram ? "Ngram" : "Self") + "_K" +
         std::to_string(p.param.k) +
         (p.param.mode == FanOutMode::kConstant ? "_Constant" : "_Geometric") + "_B" +
         std::to_string(p.param.batch);
}

class SsdGreedy : public testing::TestWithParam<Case> {};

TEST_P(SsdGreedy, EqualsArAndHits) {
  const Case c = GetParam();
  World w;
  NgramDrafter backup(NgramOptions{});
  NgramDrafter ngram(NgramOptions{});
  std::unique_ptr<ModelDrafter> self;
  Drafter* primary = &ngram;
  if (c.kind == Kind::kSelf) {
    self = w.model(w.target_path);
    primary = self.get();
  }
  SsdDrafterOptions o;
  o.k = c.k;
  o.fan_out.mode = c.mode;
  o.fan_out.budget = 2 * (c.k + 1);
  SsdDrafterCore core(*primary, &backup, o);
  SimOptions so;
  so.n_new = 40;
  const auto sim = run_ssd(*w.target->model, *w.target->kv, core, first(c.batch), so);
  const auto ar = w.ar(c.batch, so.n_new);
  for (size_t i = 0; i < c.batch; ++i) EXPECT_EQ(sim.outputs[i], ar[i]) << "sequence " << i;

  const SsdDrafterStats& st = core.stats();
  expect_consistent(st, c.k);
  EXPECT_GT(st.rounds, 0);
  EXPECT_GT(st.branches, 0);
  // A random tiny model's text rarely repeats, so prompt lookup rarely predicts it (its hits are
  // shown on repetitive text in SsdNgram below); the self-draft must hit almost always.
  if (c.kind == Kind::kSelf) {
    EXPECT_GE(st.hit_rate(), 0.9);
    EXPECT_GT(st.mean_acceptance_length_hit(), c.k);  // a self-draft is accepted in full
  }
  std::cout << "  rounds " << st.rounds << ", hit rate " << st.hit_rate() << ", acceptance "
            << "after hit " << st.mean_acceptance_length_hit() << " / after miss "
            << st.mean_acceptance_length_miss() << ", fan-out after hit [";
  for (int32_t f : st.fan_out_after_hit) std::cout << " " << f;
  std::cout << " ]\n";
}

INSTANTIATE_TEST_SUITE_P(Matrix, SsdGreedy,
                         testing::Values(Case{Kind::kNgram, 2, FanOutMode::kConstant, 1},
                                         Case{Kind::kNgram, 4, FanOutMode::kGeometric, 1},
                                         Case{Kind::kNgram, 2, FanOutMode::kGeometric, 3},
                                         Case{Kind::kNgram, 4, FanOutMode::kConstant, 3},
                                         Case{Kind::kSelf, 2, FanOutMode::kGeometric, 1},
                                         Case{Kind::kSelf, 4, FanOutMode::kConstant, 1},
                                         Case{Kind::kSelf, 2, FanOutMode::kConstant, 3},
                                         Case{Kind::kSelf, 4, FanOutMode::kGeometric, 3}),
                         case_name);

// Prompt lookup on repetitive text, against a scripted greedy target whose output continues a
// period-7 pattern: once the pattern is in the context the n-gram speculation is accepted in full
// and its (K + 1)-th token predicts the bonus, so nearly every round hits. The verification is
// greedy chain verification against the known continuation (accepted = common prefix).
TEST(SsdNgram, RepetitiveTextHitsAlmostAlways) {
  const std::vector<int32_t> period = {10, 11, 12, 13, 14, 15, 16};
  auto truth = [&](int64_t i) { return period[static_cast<size_t>(i) % period.size()]; };
  std::vector<int32_t> prompt;
  for (int64_t i = 0; i < 10; ++i) prompt.push_back(truth(i));  // a period and a half
  NgramDrafter ngram(NgramOptions{}), backup(NgramOptions{});
  SsdDrafterOptions o;
  o.k = 3;
  o.fan_out.budget = 4;
  SsdDrafterCore core(ngram, &backup, o);
  int64_t n = static_cast<int64_t>(prompt.size());
  const std::vector<int32_t> emitted0 = {truth(n)};
  core.start(0, prompt, emitted0, 0);
  ++n;
  const std::vector<int32_t> seqs = {0};
  Speculation spec = core.first_speculations(seqs).at(0);
  core.prespeculate();
  for (int round = 0; round < 40; ++round) {
    RoundOutcome r;
    r.seq = 0;
    while (r.accepted < static_cast<int32_t>(spec.tokens.size()) &&
           spec.tokens[r.accepted] == truth(n + r.accepted))
      ++r.accepted;
    for (int32_t i = 0; i <= r.accepted; ++i) r.emitted.push_back(truth(n + i));
    n += r.accepted + 1;
    spec = core.on_outcome({&r, 1}).at(0);
    core.prespeculate();
  }
  const SsdDrafterStats& st = core.stats();
  EXPECT_EQ(st.rounds, 40);
  EXPECT_GE(st.hit_rate(), 0.9) << st.hits << " hits";
  EXPECT_DOUBLE_EQ(st.mean_acceptance_length_hit(), 4.0);  // every hit speculation accepted
}

// A weaker draft (the 1-layer model) misses often; both fallbacks stay exact.
TEST(SsdMisses, BothFallbacksAreExactAndCounted) {
  World w;
  for (const int32_t b_star : {0, 1000}) {
    auto small = w.model(w.small_path);
    NgramDrafter backup(NgramOptions{});
    SsdDrafterOptions o;
    o.k = 3;
    o.fan_out.budget = 6;
    o.miss.b_star = b_star;
    SsdDrafterCore core(*small, &backup, o);
    SimOptions so;
    so.report_verify = true;
    const auto sim = run_ssd(*w.target->model, *w.target->kv, core, first(3), so);
    EXPECT_EQ(sim.outputs, w.ar(3, so.n_new)) << "b* = " << b_star;
    const SsdDrafterStats& st = core.stats();
    expect_consistent(st, o.k);
    EXPECT_GT(st.misses, 0);
    if (b_star == 0) {
      EXPECT_EQ(st.fallback_primary, 0);
      EXPECT_EQ(st.fallback_backup, st.misses);
    } else {
      EXPECT_EQ(st.fallback_backup, 0);
      EXPECT_GT(st.fallback_s, 0);
    }
  }
}

TEST(SsdFanOut, ListsAfterHitAndAfterMissAreWhatSpeculationsCarry) {
  World w;
  auto self = w.model(w.target_path);
  SsdDrafterOptions o;
  o.k = 3;
  o.fan_out.mode = FanOutMode::kLists;
  o.fan_out.after_hit = {0, 1, 1, 3};
  o.fan_out.after_miss = {2, 1, 1, 1};
  SsdDrafterCore core(*self, nullptr, o);
  EXPECT_EQ(core.predict_top(), 4);  // max F + 1
  SimOptions so;
  so.mirror = [&](std::span<const RoundOutcome>, std::span<const Speculation> next) {
    for (const Speculation& s : next) {
      if (s.tokens.size() != 3u) continue;  // cut short near the end of the context
      EXPECT_EQ(s.fan_out, s.hit() ? o.fan_out.after_hit : o.fan_out.after_miss);
      ASSERT_EQ(s.predicted.size(), 4u);  // K + 1 rankings: the extra one predicts k = K
      for (const ProcessedDist& d : s.predicted) EXPECT_EQ(d.size(), 4u);
    }
  };
  const auto sim = run_ssd(*w.target->model, *w.target->kv, core, first(2), so);
  EXPECT_EQ(sim.outputs, w.ar(2, so.n_new));
  EXPECT_EQ(core.stats().fan_out_after_hit, o.fan_out.after_hit);
  EXPECT_EQ(core.stats().fan_out_after_miss, o.fan_out.after_miss);
  EXPECT_GT(core.stats().hits, 0);
}

TEST(SsdRanks, TwoCoresSplittingTheBranchesGiveTheSameOutput) {
  World w;
  auto lead_drafter = w.model(w.target_path);
  auto other_drafter = w.model(w.target_path);
  SsdDrafterOptions o;
  o.k = 3;
  o.fan_out.budget = 8;
  SsdDrafterCore lead(*lead_drafter, nullptr, o);
  SsdDrafterCore other(*other_drafter, nullptr, o);
  bool started = false;
  int64_t from_other = 0;
  SimOptions so;
  so.mirror = [&](std::span<const RoundOutcome> outcomes, std::span<const Speculation> next) {
    if (!started) {  // the secondary rank starts the same sequences
      for (size_t i = 0; i < 2; ++i) {
        const Speculation& s = next[i];
        const std::vector<int32_t> emitted = {lead_drafter->runner().context(s.seq).back()};
        other.start(s.seq, kPrompts[i], emitted, i);
      }
      started = true;
    }
    other.adopt(outcomes, next);
  };
  std::set<std::tuple<int32_t, int32_t, int32_t>> other_keys;
  so.prespeculate = [&](SsdDrafterCore& core) {
    const std::vector<Branch> all = core.plan_branches();
    std::vector<Branch> mine, theirs;
    for (size_t i = 0; i < all.size(); ++i) (i % 2 ? theirs : mine).push_back(all[i]);
    std::vector<CacheEntry> entries = core.draft_branches(mine);
    std::vector<CacheEntry> remote = other.draft_branches(theirs);
    other_keys.clear();
    for (const CacheEntry& e : remote) other_keys.insert({e.seq, e.k, e.bonus});
    entries.insert(entries.end(), std::make_move_iterator(remote.begin()),
                   std::make_move_iterator(remote.end()));
    core.install(std::move(entries), static_cast<int64_t>(all.size()));
  };
  // Count the hits served from the secondary's half: wrap on_outcome's answers via mirror.
  auto base_mirror = so.mirror;
  so.mirror = [&](std::span<const RoundOutcome> outcomes, std::span<const Speculation> next) {
    for (size_t i = 0; i < outcomes.size(); ++i)
      if (next[i].hit() &&
          other_keys.count({outcomes[i].seq, outcomes[i].accepted, outcomes[i].emitted.back()}))
        ++from_other;
    base_mirror(outcomes, next);
  };
  const auto sim = run_ssd(*w.target->model, *w.target->kv, lead, first(2), so);
  EXPECT_EQ(sim.outputs, w.ar(2, so.n_new));
  EXPECT_GE(lead.stats().hit_rate(), 0.9);
  EXPECT_GT(from_other, 0) << "no hit came from the secondary core's branches";
  EXPECT_GT(other.stats().branches, 0);
}

// The drafter actor's split: every rank drafts its share (i % ranks) of its OWN plan_branches(), so
// the secondary's plan must equal the lead's every round, after the lead's estimates have moved
// away from the prior (self-drafting accepts nearly everything: a_p climbs from 0.7 towards 1 and
// reshapes the geometric fan-out). The secondary only adopt()s; it never sees a cache lookup.
TEST(SsdRanks, SecondaryPlansWhatTheLeadPlansAfterTheEstimatesMove) {
  World w;
  auto lead_drafter = w.model(w.target_path);
  auto other_drafter = w.model(w.target_path);
  SsdDrafterOptions o;
  o.k = 3;
  o.fan_out.budget = 8;
  SsdDrafterCore lead(*lead_drafter, nullptr, o);
  SsdDrafterCore other(*other_drafter, nullptr, o);
  bool started = false;
  SimOptions so;
  so.mirror = [&](std::span<const RoundOutcome> outcomes, std::span<const Speculation> next) {
    if (!started) {
      for (size_t i = 0; i < 2; ++i) {
        const std::vector<int32_t> emitted = {lead_drafter->runner().context(next[i].seq).back()};
        other.start(next[i].seq, kPrompts[i], emitted, i);
      }
      started = true;
    }
    other.adopt(outcomes, next);
  };
  int rounds = 0, differing = 0, union_short = 0;
  so.prespeculate = [&](SsdDrafterCore& core) {
    const std::vector<Branch> mine = core.plan_branches();
    const std::vector<Branch> theirs = other.plan_branches();
    ++rounds;
    bool same = mine.size() == theirs.size();
    for (size_t i = 0; same && i < mine.size(); ++i)
      same = mine[i].seq == theirs[i].seq && mine[i].parent == theirs[i].parent &&
             mine[i].k == theirs[i].k && mine[i].bonus == theirs[i].bonus &&
             mine[i].fan_out == theirs[i].fan_out && mine[i].position == theirs[i].position;
    differing += same ? 0 : 1;
    // What the actor drafts: the lead's even entries and the secondary's odd ones; their union
    // must be the lead's whole plan, each branch once.
    std::set<std::tuple<int32_t, int32_t, int32_t>> keys;
    for (size_t i = 0; i < mine.size(); i += 2) keys.insert({mine[i].seq, mine[i].k, mine[i].bonus});
    for (size_t i = 1; i < theirs.size(); i += 2)
      keys.insert({theirs[i].seq, theirs[i].k, theirs[i].bonus});
    union_short += keys.size() == mine.size() ? 0 : 1;
    core.install(core.draft_branches(mine), static_cast<int64_t>(mine.size()));
  };
  const auto sim = run_ssd(*w.target->model, *w.target->kv, lead, first(2), so);
  EXPECT_EQ(sim.outputs, w.ar(2, so.n_new));
  ASSERT_GT(rounds, 5);
  // The estimates did move (else this test could not tell the fix from the defect).
  EXPECT_GT(lead.fan_out().a_p(), 0.8) << "a_p stayed near the 0.7 prior";
  EXPECT_NE(lead.stats().fan_out_after_hit, geometric_fan_out(3, 8, 0.7, 0.5));
  EXPECT_NEAR(other.fan_out().a_p(), lead.fan_out().a_p(), 1e-12);
  EXPECT_EQ(other.fan_out().estimator().trials(), lead.fan_out().estimator().trials());
  EXPECT_EQ(differing, 0) << "of " << rounds << " rounds, the secondary planned differently";
  EXPECT_EQ(union_short, 0) << "rounds whose split drafted a branch twice or missed one";
}

// Pre-speculation cut short, as the drafter actor does with --prespec-chunk when the outcome
// arrives: only `keep` branches of each plan are drafted and installed, from its head (the
// likeliest) or, for comparison, from its tail.
struct CutRun {
  SsdDrafterStats stats;
  bool exact = true;
  bool ordered = true;  // every plan's weights were non-increasing
};
CutRun run_cut(World& w, size_t batch, size_t keep, bool from_head) {
  auto self = w.model(w.target_path);
  NgramDrafter backup(NgramOptions{});
  SsdDrafterOptions o;
  o.k = 3;
  o.fan_out.budget = 8;
  SsdDrafterCore core(*self, &backup, o);
  CutRun out;
  SimOptions so;
  so.n_new = 30;
  so.prespeculate = [&](SsdDrafterCore& c) {
    const std::vector<Branch> plan = c.plan_branches();
    for (size_t i = 1; i < plan.size(); ++i)
      if (plan[i].weight > plan[i - 1].weight) out.ordered = false;
    const size_t n = std::min(keep, plan.size());
    const std::span<const Branch> all(plan);
    c.install(c.draft_branches(from_head ? all.first(n) : all.last(n)),
              static_cast<int64_t>(plan.size()));
  };
  const auto sim = run_ssd(*w.target->model, *w.target->kv, core, first(batch), so);
  out.exact = sim.outputs == w.ar(batch, so.n_new);
  out.stats = core.stats();
  return out;
}

// A drafter that ranks alternatives without preferring any: every predicted token has the same
// probability, so every branch at a given k weighs the same.
class FlatRanker : public Drafter {
 public:
  std::string name() const override { return "flat"; }
  void start(int32_t, std::span<const int32_t>) override {}
  void commit(int32_t, std::span<const int32_t>) override {}
  void finish(int32_t) override {}
  std::vector<DraftTree> draft(std::span<const DraftRequest> reqs) override {
    std::vector<DraftTree> out;
    for (const DraftRequest& r : reqs) {
      std::vector<int32_t> toks;
      for (int32_t i = 0; i < r.k; ++i) toks.push_back(10 + i);
      DraftTree t = DraftTree::chain(toks);
      for (int32_t i = 0; i < r.k; ++i) {
        ProcessedDist d;
        for (int32_t j = 0; j < r.predict_top; ++j)
          d.tokens.push_back({100 + j, 1.0 / r.predict_top});
        t.predicted.push_back(std::move(d));
      }
      out.push_back(std::move(t));
    }
    return out;
  }
};

TEST(SsdCut, EqualWeightsAreServedRoundRobinOverTheSequences) {
  FlatRanker flat;
  SsdDrafterOptions o;
  o.k = 3;
  o.fan_out.budget = 8;
  SsdDrafterCore core(flat, nullptr, o);
  const std::vector<int32_t> prompt = {1, 2, 3}, first_token = {4};
  for (int32_t seq = 0; seq < 3; ++seq) core.start(seq, prompt, first_token, seq);
  core.first_speculations(std::vector<int32_t>{0, 1, 2});
  const std::vector<Branch> plan = core.plan_branches();
  ASSERT_GE(plan.size(), 6u);
  for (size_t i = 1; i < plan.size(); ++i) EXPECT_GE(plan[i - 1].weight, plan[i].weight);
  // The three likeliest (k = 0, the first alternative) come one per sequence, before any
  // sequence's second branch: a cut after three drafts serves all three.
  std::set<int32_t> seqs;
  for (size_t i = 0; i < 3; ++i) seqs.insert(plan[i].seq);
  EXPECT_EQ(seqs.size(), 3u);
  EXPECT_EQ(plan[0].weight, plan[2].weight);
}

TEST(SsdCut, TheLikeliestBranchesFirstKeepTheHitsAndStayExact) {
  World w;
  const size_t batch = 3;
  const CutRun head = run_cut(w, batch, 2 * batch, true);
  const CutRun tail = run_cut(w, batch, 2 * batch, false);
  for (const CutRun* r : {&head, &tail}) {
    EXPECT_TRUE(r->exact);
    EXPECT_TRUE(r->ordered) << "plan_branches() must list the likeliest branches first";
    const SsdDrafterStats& st = r->stats;
    expect_consistent(st, 3);
    EXPECT_GT(st.prespec_cut, 0);
    EXPECT_LT(st.branches_cached, st.branches_planned);
    EXPECT_LE(st.hits, st.predicted);
    EXPECT_LE(st.predicted, st.rounds);
    // The self-draft's real outcome is almost always planned, whatever was drafted in time.
    EXPECT_GE(static_cast<double>(st.predicted) / static_cast<double>(st.rounds), 0.9);
  }
  // Six branches of 8 x 3 drafted: from the head (each sequence's full accept with its top
  // bonus, for a self-draft) nearly every round still hits; from the tail almost none do.
  std::cout << "  hit rate, head of the plan " << head.stats.hit_rate() << ", tail "
            << tail.stats.hit_rate() << "\n";
  EXPECT_GE(head.stats.hit_rate(), 0.8);
  EXPECT_LE(tail.stats.hit_rate(), 0.3);
}

TEST(SsdSampling, SeededRunsWithSaguaroRepeat) {
  World w;
  std::vector<std::vector<int32_t>> first_run;
  for (int run = 0; run < 2; ++run) {
    auto small = w.model(w.small_path);
    NgramDrafter backup(NgramOptions{});
    SsdDrafterOptions o;
    o.k = 3;
    o.sampler.temperature = 0.9f;
    o.sampler.top_k = 8;
    o.sampler.seed = 99;
    o.saguaro_c = 0.4;
    SsdDrafterCore core(*small, &backup, o);
    SimOptions so;
    so.sampler = o.sampler;
    so.n_new = 30;
    const auto sim = run_ssd(*w.target->model, *w.target->kv, core, first(2), so);
    for (const auto& out : sim.outputs) EXPECT_EQ(out.size(), 30u);
    expect_consistent(core.stats(), o.k);
    if (run == 0)
      first_run = sim.outputs;
    else
      EXPECT_EQ(sim.outputs, first_run);
  }
}

// Sampled SSD draws what sampled SD draws: a speculation for output index n uses Philox position
// n whether it was pre-speculated (with the outcome as a suffix) or drafted after the outcome, so
// with the same seed and stream the two runs emit the same tokens. (Differently batched draft
// forwards agree to ~1e-6 in probability; a draw flips only if its uniform lands that close to a
// boundary of the inverse CDF, which the ~100 draws of a run do not.)
TEST(SsdSampling, SampledSsdEqualsSampledSdDrawForDraw) {
  World w;
  SamplerConfig s;
  s.temperature = 0.8f;
  s.top_k = 20;
  s.seed = 5;
  for (const bool self : {false, true}) {
    auto sd_drafter = w.model(self ? w.target_path : w.small_path);
    const SdResult sd = w.target->sd(*sd_drafter, kPrompts[0], 40, 3, 1, s, /*stream=*/0);
    auto drafter = w.model(self ? w.target_path : w.small_path);
    SsdDrafterOptions o;
    o.k = 3;
    o.sampler = s;
    o.fan_out.budget = 8;
    SsdDrafterCore core(*drafter, nullptr, o);
    SimOptions so;
    so.sampler = s;
    const auto sim = run_ssd(*w.target->model, *w.target->kv, core, first(1), so);
    EXPECT_EQ(sim.outputs[0], sd.gen.tokens) << (self ? "self-draft" : "1-layer draft");
    EXPECT_GT(core.stats().hits, 0) << "the hit path was not exercised";
    std::cout << "  " << (self ? "self-draft" : "1-layer draft") << ": hit rate "
              << core.stats().hit_rate() << " over " << core.stats().rounds << " rounds\n";
  }
}

TEST(SsdCore, RefusesInconsistentOutcomesAndOptions) {
  World w;
  NgramDrafter ngram(NgramOptions{});
  SsdDrafterOptions o;
  o.k = 2;
  SsdDrafterCore core(ngram, nullptr, o);
  const std::vector<int32_t> prompt = {1, 2, 3, 1, 2, 3, 1, 2};
  const std::vector<int32_t> emitted = {3};
  core.start(0, prompt, emitted, 0);
  const std::vector<int32_t> seqs = {0};
  const Speculation s = core.first_speculations(seqs).at(0);
  ASSERT_EQ(s.tokens, (std::vector<int32_t>{1, 2}));  // the n-gram continuation
  auto expect_error = [&](RoundOutcome r, const std::string& what) {
    try {
      core.on_outcome({&r, 1});
      FAIL() << "accepted an outcome with " << what;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  expect_error(RoundOutcome{0, 3, {1, 2, 3, 4}}, "accepts 3 of 2");
  expect_error(RoundOutcome{0, 1, {1}}, "1 emitted tokens for 1 accepted");
  expect_error(RoundOutcome{0, 1, {5, 6}}, "emits 5 at accepted position 0");
  expect_error(RoundOutcome{7, 0, {5}}, "sequence 7 was not started");
  SsdDrafterOptions bad = o;
  bad.saguaro_c = 0;
  EXPECT_THROW(SsdDrafterCore(ngram, nullptr, bad), Error);
  bad = o;
  bad.k = 0;
  EXPECT_THROW(SsdDrafterCore(ngram, nullptr, bad), Error);
}

}  // namespace
}  // namespace ssd
