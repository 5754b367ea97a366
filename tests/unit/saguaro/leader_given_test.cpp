// SsdDrafterCore with speculations the target leader drafted (RoundOutcome::given, --miss-at
// leader): adopted as the sequence's speculation (a miss), ranked by the core's own lookup up to
// the first token where the two drafts differ, never looked up in the cache nor drafted again;
// malformed ones refused before anything changes.
#include <gtest/gtest.h>

#include "runtime/core/error.h"
#include "runtime/drafters/ngram_drafter.h"
#include "runtime/saguaro/ssd_drafter_core.h"

namespace ssd {
namespace {

Speculation given(std::vector<int32_t> tokens, SpecSource source = SpecSource::kPrimary) {
  Speculation g;
  g.source = source;
  g.tokens = std::move(tokens);
  for (int32_t t : g.tokens) g.q.push_back(ProcessedDist{{TokenProb{t, 1.0f}}});
  return g;
}

struct Core {
  NgramDrafter ngram{NgramOptions{}};
  SsdDrafterCore core;
  explicit Core(Drafter* backup = nullptr) : core(ngram, backup, options()) {
    // ... 1 2 3 4 1 2 | 3: the lookup drafts 4 1 and ranks after every prefix.
    const std::vector<int32_t> prompt = {1, 2, 3, 4, 1, 2, 3, 4, 1, 2};
    const std::vector<int32_t> emitted = {3};
    core.start(0, prompt, emitted, 0);
    const std::vector<int32_t> seqs = {0}, ks = {2};
    core.first_speculations(seqs, ks);
  }
  static SsdDrafterOptions options() {
    SsdDrafterOptions o;
    o.k = 4;
    o.fan_out.budget = 6;
    return o;
  }
  // Outcome: 4 accepted, then 1 (the full speculation 4 1 was accepted... as 4, then bonus 1).
  RoundOutcome outcome(std::optional<Speculation> g, int32_t next_k = 2) {
    RoundOutcome o;
    o.seq = 0;
    o.accepted = 2;
    o.emitted = {4, 1, 2};
    o.next_k = next_k;
    o.given = std::move(g);
    return o;
  }
};

TEST(LeaderGiven, AdoptedAndRankedWhileTheDraftsAgree) {
  Core c;
  // After ... 4 1 2 the lookup drafts 3 4: the leader's copy drafts the same.
  const std::vector<RoundOutcome> outs = {c.outcome(given({3, 4}))};
  const std::vector<Speculation> next = c.core.on_outcome(outs);
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(next[0].tokens, (std::vector<int32_t>{3, 4}));
  EXPECT_EQ(next[0].source, SpecSource::kPrimary);
  EXPECT_EQ(next[0].predicted.size(), 3u) << "a ranking at positions 0..2";
  EXPECT_EQ(c.core.stats().misses, 1);
  EXPECT_EQ(c.core.stats().leader_drafted, 1);
  EXPECT_EQ(c.core.stats().fallback_primary + c.core.stats().fallback_backup, 0);
  EXPECT_EQ(c.core.speculation(0).tokens, next[0].tokens);
  EXPECT_FALSE(c.core.plan_branches().empty());
}

TEST(LeaderGiven, RankingStopsWhereTheDraftsDiffer) {
  Core c;
  const std::vector<RoundOutcome> outs = {c.outcome(given({3, 9}))};
  const std::vector<Speculation> next = c.core.on_outcome(outs);
  EXPECT_EQ(next[0].tokens, (std::vector<int32_t>{3, 9}));
  EXPECT_EQ(next[0].predicted.size(), 2u) << "positions 0 and 1: conditioned on 3 only";
}

TEST(LeaderGiven, BackupDraftWithoutABackupIsAdoptedUnranked) {
  Core c;  // no backup on this core
  const std::vector<RoundOutcome> outs = {c.outcome(given({3, 4}, SpecSource::kBackup))};
  const std::vector<Speculation> next = c.core.on_outcome(outs);
  EXPECT_EQ(next[0].tokens, (std::vector<int32_t>{3, 4}));
  EXPECT_EQ(next[0].source, SpecSource::kBackup);
  EXPECT_TRUE(next[0].predicted.empty());
}

TEST(LeaderGiven, MalformedIsRefusedAndChangesNothing) {
  Core c;
  auto refused = [&](RoundOutcome o, const std::string& what) {
    const std::vector<RoundOutcome> outs = {std::move(o)};
    try {
      c.core.on_outcome(outs);
      ADD_FAILURE() << "accepted: " << what;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  refused(c.outcome(given({3, 4}, SpecSource::kCache)), "has source cache");
  refused(c.outcome(given({3, 4, 5})), "has 3 tokens for a length of 2 asked");
  refused(c.outcome(given({3}), 0), "has 1 tokens for a length of 0 asked");
  Speculation short_q = given({3, 4});
  short_q.q.pop_back();
  refused(c.outcome(short_q), "has 2 tokens but 1 distributions");
  EXPECT_EQ(c.core.stats().rounds, 0) << "nothing was committed";
  EXPECT_EQ(c.core.speculation(0).tokens, (std::vector<int32_t>{4, 1}));
}

}  // namespace
}  // namespace ssd
