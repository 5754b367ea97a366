// Misses drafted by the target leader (--miss-at leader, actors/roles/leader_lookup.h):
//   - the drafter core says how it answers a miss (SsdDrafterCore::miss_lookup): with a lookup
//     primary, kPrimary; with a model primary, kNone, or kBackup once its miss policy chooses the
//     (lookup) backup;
//   - the drafter actor tells the leader so in its answer, and for an outcome the leader marks
//     leader_drafted it sends no answer, adopts the leader's tokens as the speculation and
//     pre-speculates after them: its next push has the branch after the leader's whole draft, and
//     a later pushed hit on that branch is accepted (it checks the hit against the adopted tokens);
//   - a change of that choice in a round with no answer and no pre-speculation comes as a push of
//     no entries, to a leader that takes pushes only;
//   - a whole split run (RemoteDecoder and a drafter actor over loopback, n-gram primary): greedy
//     SSD equals AR; with the leader's copy every round after round 0 starts without waiting for
//     an answer, and without it misses are answered by the drafter as before.
#include <gtest/gtest.h>

#include <optional>

#include "actors/roles/drafter_actor.h"
#include "actors/roles/remote_decode.h"
#include "actors/transport/loopback_transport.h"
#include "runtime/drafters/ngram_drafter.h"
#include "tests/unit/actors/split_fixture.h"

namespace ssd {
namespace {

// A drafter that is not a lookup (drafts_cheaply() false) and drafts nothing.
class ModelLike final : public Drafter {
 public:
  std::string name() const override { return "model-like"; }
  void start(int32_t, std::span<const int32_t>) override {}
  void commit(int32_t, std::span<const int32_t>) override {}
  void finish(int32_t) override {}
  std::vector<DraftTree> draft(std::span<const DraftRequest> reqs) override {
    return std::vector<DraftTree>(reqs.size());
  }
};

TEST(MissLookup, FollowsThePrimaryAndTheMissPolicy) {
  SsdDrafterOptions o;
  o.k = 4;
  NgramDrafter ngram(NgramOptions{}), backup(NgramOptions{});
  ModelLike model;
  o.miss.b_star = 1 << 20;  // the primary answers every miss
  EXPECT_EQ(SsdDrafterCore(ngram, &backup, o).miss_lookup(4), MissLookup::kPrimary);
  EXPECT_EQ(SsdDrafterCore(model, &backup, o).miss_lookup(4), MissLookup::kNone);
  o.miss.b_star = 2;  // the backup past batch 2
  EXPECT_EQ(SsdDrafterCore(model, &backup, o).miss_lookup(2), MissLookup::kNone);
  EXPECT_EQ(SsdDrafterCore(model, &backup, o).miss_lookup(3), MissLookup::kBackup);
  EXPECT_EQ(SsdDrafterCore(model, nullptr, o).miss_lookup(3), MissLookup::kNone) << "no backup";
  o.plain = true;  // sd: the drafter rank drafts every answer
  EXPECT_EQ(SsdDrafterCore(ngram, &backup, o).miss_lookup(4), MissLookup::kNone);
}

// The test plays the target leader against a drafter actor with an n-gram primary.
class LeaderDraftedTest : public test::split::LeaderSeatTest {
 public:
  void SetUp() override {
    SsdDrafterOptions so;
    so.k = 4;
    so.fan_out.budget = 6;
    start_actor(ngram_, so);
  }
  static SeqSpeculation one_hot(int32_t seq, std::vector<int32_t> tokens) {
    SeqSpeculation s{seq, static_cast<uint8_t>(SpecSource::kPrimary), std::move(tokens), {}};
    for (int32_t t : s.tokens) s.q.push_back(ProcessedDist{{TokenProb{t, 1.0f}}});
    return s;
  }

  NgramDrafter ngram_{NgramOptions{}};
};

// Starts sequence 0 on the drafter (and on `copy`, the leader's lookup) with a repetitive
// prompt, takes the round-0 answer and push; returns the first speculation (4 1).
SeqSpeculation start_seq(LeaderDraftedTest& t, LeaderLookup* copy) {
  StartSeqs s;
  s.seqs = {0};
  s.prompts = {{1, 2, 3, 4, 1, 2, 3, 4, 1, 2}};
  s.emitted = {{3}};
  s.streams = {0};
  s.feature_rows = {0};
  s.prespeculate = true;
  s.push = true;
  s.first_k = {2};
  if (copy) copy->start(0, s.prompts[0], s.emitted[0]);
  t.leader().send(1, s);
  const SpeculationMsg first = t.expect<SpeculationMsg>();
  EXPECT_EQ(first.miss_lookup, static_cast<uint8_t>(MissLookup::kPrimary))
      << "an n-gram primary answers misses with a lookup the leader can run";
  EXPECT_EQ(t.expect<PrespecPush>().round, 0);
  return first.seqs.empty() ? SeqSpeculation{} : first.seqs[0];
}

TEST_F(LeaderDraftedTest, NoAnswerAndTheDrafterPreSpeculatesAfterTheLeadersDraft) {
  LeaderLookup copy(std::make_unique<NgramDrafter>(NgramOptions{}), nullptr);
  const SeqSpeculation first = start_seq(*this, &copy);
  ASSERT_EQ(first.tokens, (std::vector<int32_t>{4, 1}));
  // Round 1's outcome: nothing accepted, then 2 (no branch planned it: the push has none). The
  // leader drafts the next speculation with its copy of the n-gram lookup.
  const std::vector<int32_t> emitted = {2};
  copy.commit(0, emitted);
  const std::optional<SeqSpeculation> mine =
      copy.draft(MissLookup::kPrimary, 0, 2, SamplerConfig{}, 0, 2);
  ASSERT_TRUE(mine);
  ASSERT_FALSE(mine->tokens.empty()) << "the context has a match for 2";
  Outcome o;
  o.round = 1;
  o.seqs = {SeqOutcome{0, 0, emitted, 0, 0, 2, false, true, *mine}};
  leader().send(1, o);
  // No answer: the next frame is the pre-speculation after the leader's draft.
  const PrespecPush push1 = expect<PrespecPush>();
  EXPECT_EQ(push1.round, 1);
  ASSERT_FALSE(push1.entries.empty()) << "no branch after the leader's draft";
  for (const PushedSpec& e : push1.entries)
    EXPECT_LE(e.k, static_cast<int32_t>(mine->tokens.size())) << "a branch past the draft";
  // The likeliest branch (accepting at least one of the leader's tokens, here)
  const PushedSpec e = push1.entries.front();
  ASSERT_GE(e.k, 1);

  // Round 2: the leader accepted e.k of its tokens and took the pushed branch; the drafter checks
  // the outcome against the speculation it adopted and finds the hit in its cache.
  std::vector<int32_t> emitted2(mine->tokens.begin(), mine->tokens.begin() + e.k);
  emitted2.push_back(e.bonus);
  Outcome o2;
  o2.round = 2;
  o2.seqs = {SeqOutcome{0, e.k, emitted2, 0, 0, 2, /*pushed=*/true}};
  leader().send(1, o2);
  leader().send(1, DrafterStatsAsk{});
  const Envelope env = [&] {
    for (;;) {  // no answer for the pushed hit either: pushes, then the figures
      Envelope x = recv();
      if (x.kind != MsgKind::kPrespecPush) return x;
    }
  }();
  ASSERT_EQ(env.kind, MsgKind::kDrafterStats) << "got " << kind_name(env.kind);
  const DrafterStatsMsg d = decode<DrafterStatsMsg>(env);
  EXPECT_EQ(d.hits, 1);
  EXPECT_EQ(d.misses, 1) << "the leader-drafted round is a miss";
  EXPECT_EQ(d.fallback_primary + d.fallback_backup, 0) << "the drafter drafted no answer";
}

// The leader's tokens are the speculation, even where the drafter's own lookup would differ: an
// outcome accepting them is consistent (the drafter checks accepted tokens against it).
TEST_F(LeaderDraftedTest, TheLeadersTokensAreAdoptedWhereTheLookupDiffers) {
  start_seq(*this, nullptr);
  Outcome o;
  o.round = 1;
  o.seqs = {SeqOutcome{0, 1, {4, 9}, 0, 0, 2, false, true, one_hot(0, {5, 6})}};
  leader().send(1, o);
  Outcome o2;
  o2.round = 2;
  o2.seqs = {SeqOutcome{0, 2, {5, 6, 7}, 0, 0, 2, false, true, one_hot(0, {8})}};
  leader().send(1, o2);
  leader().send(1, DrafterStatsAsk{});
  const Envelope env = [&] {
    for (;;) {
      Envelope x = recv();
      if (x.kind != MsgKind::kPrespecPush) return x;
    }
  }();
  ASSERT_EQ(env.kind, MsgKind::kDrafterStats) << "got " << kind_name(env.kind);
  const DrafterStatsMsg d = decode<DrafterStatsMsg>(env);
  EXPECT_EQ(d.misses, 2);
  EXPECT_EQ(d.outcomes_at_k[2], 1) << "5 6 accepted";
}

using World = test::split::TinyTarget;

struct Split {
  RemoteDecodeResult ssd, sd;
};

// Both modes through a leader with (or without) its own n-gram copy and a drafter actor whose
// primary is n-gram.
Split run_ngram(World& w, std::span<const GenerationRequest> reqs, bool at_leader,
                const SamplerConfig& sampler = {}) {
  LoopbackHub hub(2);
  NgramDrafter primary(NgramOptions{});
  SsdDrafterOptions o;
  o.sampler = sampler;
  o.k = 3;
  o.fan_out.budget = 6;
  test::split::DrafterActorThread actor(hub, primary, o);
  actor.ready();
  Split out;
  {
    LocalTarget target(*w.engine->model, *w.engine->kv);
    RemoteDecoder dec(target, hub.endpoint(0), actor.leader_layout, {}, 3, actor.leader_dog, 30);
    if (at_leader)
      dec.set_leader_lookups({std::make_unique<LeaderLookup>(
          std::make_unique<NgramDrafter>(NgramOptions{}),
          std::make_unique<NgramDrafter>(NgramOptions{}))});
    out.ssd = dec.run(reqs, true);
    out.sd = dec.run(reqs, false);
    dec.shutdown_drafters();
  }
  actor.join();
  return out;
}

// Repetitive prompts, so the n-gram lookup finds matches.
std::vector<GenerationRequest> repetitive_requests(const SamplerConfig& s = {}) {
  std::vector<GenerationRequest> reqs = test::split::staggered_requests(3, 14, s);
  for (GenerationRequest& r : reqs)
    for (int rep = 0; rep < 2; ++rep) {
      const std::vector<int32_t> p = r.prompt;
      r.prompt.insert(r.prompt.end(), p.begin(), p.end());
    }
  return reqs;
}

TEST(LeaderDraftedRun, GreedyEqualsArAndOnlyRoundZeroWaits) {
  World w;
  const std::vector<GenerationRequest> reqs = repetitive_requests();
  LocalTarget ar_target(*w.engine->model, *w.engine->kv);
  const std::vector<GenerationResult> ar = generate_ar_batch(ar_target, reqs);
  const Split leader = run_ngram(w, reqs, true);
  const Split drafter = run_ngram(w, reqs, false);
  for (size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_EQ(leader.ssd.gen[i].tokens, ar[i].tokens) << "leader, ssd, request " << i;
    EXPECT_EQ(leader.sd.gen[i].tokens, ar[i].tokens) << "leader, sd, request " << i;
    EXPECT_EQ(drafter.ssd.gen[i].tokens, ar[i].tokens) << "drafter, ssd, request " << i;
  }
  const SplitFigures& f = leader.ssd.split;
  EXPECT_GT(f.leader_drafted, 0);
  EXPECT_EQ(f.leader_drafted, f.misses) << "every miss after round 0 drafted by the leader";
  EXPECT_EQ(f.rounds_waited, 1) << "of " << f.rounds << " rounds, only round 0 waited";
  EXPECT_GT(f.rounds, 1);
  EXPECT_EQ(drafter.ssd.split.leader_drafted, 0);
  EXPECT_GT(drafter.ssd.split.rounds_waited, 1) << "misses wait for the drafter's answer";
  EXPECT_EQ(leader.sd.split.leader_drafted, 0) << "sd: the drafter rank drafts every answer";
  EXPECT_GT(leader.sd.split.rounds_waited, 1);
  // The outcome trace: a miss the drafter rank answered says with which fallback ("backup"); a
  // hit or a miss the leader drafted does not.
  int64_t answered = 0;
  for (const sim::OutcomeRecord& r : drafter.ssd.outcomes) {
    if (!r.backup) continue;
    ++answered;
    EXPECT_EQ(r.hit, std::optional<bool>(false)) << "round " << r.round << ", request " << r.seq;
  }
  EXPECT_GT(answered, 0);
  for (const sim::OutcomeRecord& r : leader.ssd.outcomes)
    EXPECT_FALSE(r.backup.has_value()) << "round " << r.round << ", request " << r.seq;
}

// Sampled: the leader's copy drafts the very tokens (and one-hot q) the drafter's lookup would,
// so the target draws the same tokens whoever drafted a miss (and whether a hit came pushed or
// was drafted again by the leader): the output is the same token for token.
TEST(LeaderDraftedRun, SampledOutputIsTheSameWhoeverDraftsTheMiss) {
  World w;
  SamplerConfig s;
  s.temperature = 0.8f;
  s.seed = 7;
  const std::vector<GenerationRequest> reqs = repetitive_requests(s);
  const Split leader = run_ngram(w, reqs, true, s);
  const Split drafter = run_ngram(w, reqs, false, s);
  EXPECT_GT(leader.ssd.split.leader_drafted, 0);
  for (size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_EQ(leader.ssd.gen[i].tokens, drafter.ssd.gen[i].tokens) << "request " << i;
    EXPECT_EQ(leader.ssd.gen[i].tokens, leader.sd.gen[i].tokens) << "ssd against sd, " << i;
  }
}

}  // namespace
}  // namespace ssd

namespace ssd {
namespace {

// A round with no answer and no pre-speculation (every sequence a decode step): a change of how
// the drafter answers misses (here to the backup, past b* = 2 at batch 3) reaches a leader that
// takes pushes as a push of no entries, and only such a leader (the server's takes none); with
// no change there is nothing to tell.
TEST(MissLookupNotice, AChangeWithNoAnswerComesAsAPushOfNoEntriesToALeaderTakingPushes) {
  for (const bool backup_past_two : {true, false}) {
    for (const bool push : {true, false}) {
      SCOPED_TRACE(::testing::Message() << "backup past 2: " << backup_past_two
                                        << ", push: " << push);
      ModelLike model;
      SsdDrafterOptions o;
      o.k = 4;
      o.fan_out.budget = 6;
      o.miss.b_star = backup_past_two ? 2 : 1 << 20;
      LoopbackHub hub(2);
      test::split::DrafterActorThread actor(hub, model, o);  // with an n-gram backup
      actor.ready();
      StartSeqs s;
      s.seqs = {0, 1, 2};
      s.prompts = {{1, 2, 3}, {4, 5, 6}, {7, 8, 9}};
      s.emitted = {{4}, {7}, {10}};
      s.streams = {0, 1, 2};
      s.feature_rows = {0, 0, 0};
      s.prespeculate = true;
      s.push = push;
      s.first_k = {0, 0, 0};  // decode steps: no answer, nothing to pre-speculate
      actor.leader().send(1, s);
      if (backup_past_two && push) {
        const PrespecPush notice = actor.expect<PrespecPush>();
        EXPECT_TRUE(notice.entries.empty());
        EXPECT_EQ(notice.miss_lookup, static_cast<uint8_t>(MissLookup::kBackup));
      }
      // Frames of one peer keep their order: nothing else came before the figures.
      actor.leader().send(1, DrafterStatsAsk{});
      actor.expect<DrafterStatsMsg>();
      actor.leader().send(1, DrafterShutdown{});
      actor.join();
    }
  }
}

}  // namespace
}  // namespace ssd
