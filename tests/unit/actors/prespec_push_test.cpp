// Pushed pre-speculation (protocol.h, PrespecPush) on the drafter actor: the test plays the target
// leader over the loopback transport with the n-gram drafter (deterministic, cheap) and checks
// that the drafter lead
//   - pushes every cache entry of a round, when StartSeqs::push asks, and with chunked
//     pre-speculation each chunk's entries as soon as the chunk is drafted (one push per chunk,
//     adding up to the cache), so the leader can take a hit from the first chunk;
//   - answers nothing for an outcome the leader marks pushed (it took the entry from the push),
//     counts it as a hit, and pushes the next round's cache;
//   - ranks a decode step (length 0) with a lookup drafter and pushes the branches after it, so
//     the round after a decode step can hit;
//   - fails, naming the sequence, when the leader claims a pushed speculation its cache lacks.
#include <gtest/gtest.h>


#include "actors/roles/drafter_actor.h"
#include "actors/transport/loopback_transport.h"
#include "runtime/drafters/ngram_drafter.h"
#include "tests/unit/actors/split_fixture.h"

namespace ssd {
namespace {

class PrespecPushTest : public test::split::LeaderSeatTest {
 protected:
  void SetUp() override {
    SsdDrafterOptions so;
    so.k = 4;
    so.fan_out.budget = 6;
    so.prespec_chunk = chunk();
    start_actor(ngram_, so);
  }
  virtual int32_t chunk() const { return 0; }  // SsdDrafterOptions::prespec_chunk
  // A repetitive prompt, so the n-gram lookup drafts and ranks: ... 1 2 3 4 1 2 | 3.
  void start(int32_t first_k, std::vector<int32_t> prompt = {1, 2, 3, 4, 1, 2, 3, 4, 1, 2},
             int32_t emitted = 3) {
    StartSeqs s;
    s.seqs = {0};
    s.prompts = {std::move(prompt)};
    s.emitted = {{emitted}};
    s.streams = {0};
    s.feature_rows = {0};
    s.prespeculate = true;
    s.push = true;
    s.first_k = {first_k};
    leader().send(1, s);
  }
  static const PushedSpec* find(const PrespecPush& p, int32_t k) {
    for (const PushedSpec& e : p.entries)
      if (e.k == k) return &e;
    return nullptr;
  }

  NgramDrafter ngram_{NgramOptions{}};
};

TEST_F(PrespecPushTest, PushedHitGetsNoAnswerAndTheNextCacheIsPushed) {
  start(2);
  const SpeculationMsg first = expect<SpeculationMsg>();
  ASSERT_EQ(first.seqs.size(), 1u);
  EXPECT_EQ(first.seqs[0].tokens, (std::vector<int32_t>{4, 1}));
  const PrespecPush push0 = expect<PrespecPush>();
  EXPECT_EQ(push0.round, 0);
  const PushedSpec* full = find(push0, 2);  // both tokens accepted, then the looked-up bonus
  ASSERT_NE(full, nullptr) << push0.entries.size() << " entries, none for k = 2";
  EXPECT_EQ(full->bonus, 2);
  EXPECT_FALSE(full->tokens.empty());

  Outcome o;
  o.round = 1;
  o.seqs = {SeqOutcome{0, 2, {4, 1, full->bonus}, 0, 0, 1, /*pushed=*/true}};
  leader().send(1, o);
  // No answer: the leader holds the speculation; the next frame is round 1's push.
  const PrespecPush push1 = expect<PrespecPush>();
  EXPECT_EQ(push1.round, 1);
  leader().send(1, DrafterStatsAsk{});
  const DrafterStatsMsg d = expect<DrafterStatsMsg>();
  EXPECT_EQ(d.hits, 1);
  EXPECT_EQ(d.misses, 0);
}

class PrespecPushChunkTest : public PrespecPushTest {
 protected:
  int32_t chunk() const override { return 1; }
};

// One branch per chunk: one push per branch drafted, all of round 0, before the install (the
// stats question waits for the job, so every push of the round precedes its answer); the entry
// of the first push is a hit the drafter agrees with.
TEST_F(PrespecPushChunkTest, EachChunkIsPushedAsItIsDrafted) {
  // "1 2" was followed by 3, 4 and 5: the lookup ranks three tokens after it, so several branches.
  start(2, {1, 2, 3, 9, 1, 2, 4, 9, 1, 2, 5, 9, 1}, 2);
  const SpeculationMsg first = expect<SpeculationMsg>();
  ASSERT_EQ(first.seqs.size(), 1u);
  ASSERT_EQ(first.seqs[0].tokens.size(), 2u);
  leader().send(1, DrafterStatsAsk{});
  std::vector<PrespecPush> pushes;
  DrafterStatsMsg d;
  for (;;) {
    const Envelope env = recv();
    if (env.kind == MsgKind::kDrafterStats) {
      d = decode<DrafterStatsMsg>(env);
      break;
    }
    ASSERT_EQ(env.kind, MsgKind::kPrespecPush) << "got " << kind_name(env.kind);
    pushes.push_back(decode<PrespecPush>(env));
  }
  ASSERT_GE(d.branches, 2) << "too few branches to see chunks";
  ASSERT_EQ(static_cast<int64_t>(pushes.size()), d.branches) << "one push per chunk of one";
  for (const PrespecPush& p : pushes) {
    EXPECT_EQ(p.round, 0);
    EXPECT_EQ(p.entries.size(), 1u);
  }
  const PushedSpec e = pushes.front().entries.front();  // the likeliest branch, drafted first
  Outcome o;
  o.round = 1;
  std::vector<int32_t> emitted(first.seqs[0].tokens.begin(), first.seqs[0].tokens.begin() + e.k);
  emitted.push_back(e.bonus);
  o.seqs = {SeqOutcome{0, e.k, emitted, 0, 0, 1, /*pushed=*/true}};
  leader().send(1, o);
  EXPECT_EQ(expect<PrespecPush>().round, 1) << "no answer for the pushed hit, then round 1";
  leader().send(1, DrafterStatsAsk{});
  const Envelope env = [&] {
    for (;;) {  // the rest of round 1's pushes, then the figures
      Envelope x = recv();
      if (x.kind != MsgKind::kPrespecPush) return x;
    }
  }();
  ASSERT_EQ(env.kind, MsgKind::kDrafterStats);
  EXPECT_EQ(decode<DrafterStatsMsg>(env).hits, 1);
}

TEST_F(PrespecPushTest, DecodeStepIsRankedAndItsBranchesPushed) {
  start(0);  // a decode step first: no answer, but a ranked step to pre-speculate after
  const PrespecPush push0 = expect<PrespecPush>();
  const PushedSpec* e = find(push0, 0);
  ASSERT_NE(e, nullptr) << "no branch after the decode step";
  EXPECT_EQ(e->bonus, 4) << "the lookup's guess of the token after ... 1 2 3";
  Outcome o;
  o.round = 1;
  o.seqs = {SeqOutcome{0, 0, {e->bonus}, 0, 0, 1, /*pushed=*/true}};
  leader().send(1, o);
  EXPECT_EQ(expect<PrespecPush>().round, 1);
  leader().send(1, DrafterStatsAsk{});
  EXPECT_EQ(expect<DrafterStatsMsg>().hits, 1);
}

TEST_F(PrespecPushTest, APushedClaimTheCacheLacksIsAnError) {
  start(2);
  expect<SpeculationMsg>();
  expect<PrespecPush>();
  Outcome o;
  o.round = 1;
  o.seqs = {SeqOutcome{0, 0, {9999}, 0, 0, 1, /*pushed=*/true}};  // never pre-speculated
  leader().send(1, o);
  stopped_ = true;
  const std::exception_ptr error = actor_->stop();
  ASSERT_TRUE(error);
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& ex) {
    EXPECT_NE(std::string(ex.what()).find("pushed speculation for sequence 0"), std::string::npos)
        << ex.what();
  }
}

}  // namespace
}  // namespace ssd
