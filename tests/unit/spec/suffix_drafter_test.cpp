// The suffix drafter's proposals on hand-made texts, where the right draft is known:
//   - it continues the sequence's own earlier text (prompt and committed output), through the
//     request's hypothetical suffix, and drafts nothing without a match;
//   - it continues a finished earlier request's text, and does not when its cache is off;
//   - earlier requests inform only later requests of the same memory scope, and the scope used
//     least recently is dropped past the limit;
//   - branches are the likeliest distinct continuations by frequency, each with a one-hot q,
//     ties going to the most recent (own text before earlier requests);
//     predicted lists hold the empirical distribution; branches below --suffix-min-prob are cut;
//   - the depth follows the path probability and the match length, and a branch whose first
//     token is not the only continuation the text had is cut (to one token by default);
//   - a draft comes from the sequence's own text or from earlier requests, whichever expects
//     more accepted tokens (the own text on a tie);
//   - earlier requests' text needs more evidence: a one-token match there is unsure (cut), and
//     an unsure first token with less than half the continuations there is not offered;
//   - with nothing to offer, the token after the own text's latest other spelling of the last
//     token is offered alone (with spelling classes);
//   - bad options and unknown sequences are refused with a message.
#include <gtest/gtest.h>

#include "runtime/core/error.h"
#include "runtime/drafters/suffix_drafter.h"

namespace ssd {
namespace {

using Tokens = std::vector<int32_t>;

DraftRequest req(int32_t seq, int32_t k, int32_t width = 1, Tokens suffix = {}) {
  DraftRequest r;
  r.seq = seq;
  r.k = k;
  r.width = width;
  r.suffix = std::move(suffix);
  return r;
}

DraftTree draft(SuffixDrafter& d, const DraftRequest& r) { return d.draft({&r, 1}).front(); }

// Tests of what is drafted rather than how long: a cap of 4 tokens per matched token (the
// default, stated so that the short matches of these texts keep cutting nothing).
constexpr double kDeep = 4.0;

TEST(SuffixDrafter, ContinuesTheSequencesOwnText) {
  SuffixDrafter d(SuffixDrafterOptions{.depth_per_match = kDeep});
  d.start(0, Tokens{1, 2, 3, 4, 5, 9, 1, 2});
  d.commit(0, Tokens{3});
  const DraftTree t = draft(d, req(0, 4));
  EXPECT_EQ(t.tokens, (Tokens{4, 5, 9, 1}));
  EXPECT_TRUE(t.is_chain());
  for (size_t i = 0; i < t.size(); ++i) {
    ASSERT_EQ(t.q[i].tokens.size(), 1u);
    EXPECT_EQ(t.q[i].tokens[0].id, t.tokens[i]);
    EXPECT_DOUBLE_EQ(t.q[i].tokens[0].prob, 1.0);
  }
  EXPECT_EQ(draft(d, req(0, 2, 1, {4, 5})).tokens, (Tokens{9, 1})) << "through the suffix";
  EXPECT_TRUE(draft(d, req(0, 4, 1, {77})).empty()) << "77 never occurred: no draft";
}

TEST(SuffixDrafter, ContinuesAnEarlierRequestAndForgetsWithoutACache) {
  const Tokens first = {10, 11, 12, 13, 14, 15, 16, 17};
  for (int64_t cache : {int64_t{1} << 20, int64_t{0}}) {
    SuffixDrafter d(SuffixDrafterOptions{.cache_tokens = cache});
    d.start(0, Tokens{1, 2});
    d.commit(0, first);
    d.finish(0);
    d.start(1, Tokens{3, 11, 12, 13});
    const DraftTree t = draft(d, req(1, 3));
    if (cache > 0) {
      EXPECT_EQ(t.tokens, (Tokens{14, 15, 16}));
      EXPECT_EQ(d.cache().tokens(), 10);
    } else {
      EXPECT_TRUE(t.empty());
    }
    d.finish(1);
  }
}

TEST(SuffixDrafter, EarlierRequestsInformOnlyTheirOwnMemoryScope) {
  const Tokens answer = {10, 11, 12, 13, 14, 15, 16, 17};
  SuffixDrafter d({});
  d.set_memory_scope(1);
  d.start(0, Tokens{1, 2});
  d.commit(0, answer);
  d.finish(0);
  d.set_memory_scope(2);  // the same prompt in another configuration: it must not see the answer
  d.start(1, Tokens{3, 11, 12, 13});
  EXPECT_TRUE(draft(d, req(1, 3)).empty());
  EXPECT_EQ(d.cache().tokens(), 0);
  d.finish(1);
  d.set_memory_scope(1);  // back in the first scope, the answer is remembered
  d.start(2, Tokens{3, 11, 12, 13});
  EXPECT_EQ(draft(d, req(2, 3)).tokens, (Tokens{14, 15, 16}));
  d.finish(2);
  // Past kMaxScopes scopes, the one used least recently (scope 2) is dropped, not scope 1.
  for (uint64_t scope = 3; scope < 3 + SuffixDrafter::kMaxScopes - 1; ++scope)
    d.set_memory_scope(scope);
  d.set_memory_scope(1);
  EXPECT_EQ(d.cache().tokens(), 10 + 4) << "scope 1 kept both of its requests";
}

TEST(SuffixDrafter, BranchesByFrequencyAndCutsRareOnes) {
  // After 7: 8 three times, 9 once. After 7 8: 1 twice, 2 once.
  const Tokens text = {7, 8, 1, 7, 8, 1, 7, 9, 3, 7, 8, 2, 7};
  SuffixDrafter d(
      SuffixDrafterOptions{.min_prob = 0.2, .depth_per_match = kDeep, .unsure_root_depth = 0});
  d.start(0, text);
  DraftRequest r = req(0, 2, 3);
  r.predict_top = 4;
  const DraftTree t = draft(d, r);
  // Branch 8 (p 3/4) goes on to 1 (p 3/4 x 2/3 = 1/2); branch 9 (p 1/4) to 3 (p 1/4 x 1).
  EXPECT_EQ(t.tokens, (Tokens{8, 1, 9, 3}));
  EXPECT_EQ(t.parents, (std::vector<int32_t>{-1, 0, -1, 2}));
  ASSERT_EQ(t.predicted.size(), t.size());
  ASSERT_EQ(t.predicted[0].tokens.size(), 2u);
  EXPECT_EQ(t.predicted[0].tokens[0].id, 8);
  EXPECT_DOUBLE_EQ(t.predicted[0].tokens[0].prob, 0.75);
  EXPECT_DOUBLE_EQ(t.predicted[1].tokens[0].prob, 2.0 / 3.0);
  // min_prob 0.3 cuts branch 9; min_prob 0.6 also stops branch 8 before 1 (p 1/2).
  SuffixDrafter strict(
      SuffixDrafterOptions{.min_prob = 0.3, .depth_per_match = kDeep, .unsure_root_depth = 0});
  strict.start(0, text);
  EXPECT_EQ(draft(strict, req(0, 2, 3)).tokens, (Tokens{8, 1}));
  SuffixDrafter stricter(
      SuffixDrafterOptions{.min_prob = 0.6, .depth_per_match = kDeep, .unsure_root_depth = 0});
  stricter.start(0, text);
  EXPECT_EQ(draft(stricter, req(0, 2, 3)).tokens, (Tokens{8}));
}

TEST(SuffixDrafter, EquallyFrequentContinuationsGoMostRecentFirst) {
  // After 7: 8 once, then 9 once (later); after 7 9: 2. The later continuation wins the tie.
  SuffixDrafter d(SuffixDrafterOptions{.depth_per_match = kDeep, .unsure_root_depth = 0});
  d.start(0, Tokens{7, 8, 1, 7, 9, 2, 7});
  EXPECT_EQ(draft(d, req(0, 2)).tokens, (Tokens{9, 2}));
  // The sequence's own text ranks before an earlier request's with the same count.
  SuffixDrafter both({});
  both.start(0, Tokens{4, 5, 6});
  both.finish(0);
  both.start(1, Tokens{4, 3, 1, 4});
  EXPECT_EQ(draft(both, req(1, 1)).tokens, (Tokens{3}));
}

TEST(SuffixDrafter, DepthFollowsTheMatchLength) {
  // The context ends in 5, matched by one token only: depth cap ceil(4 x 1) = 4 by default.
  SuffixDrafter d({});
  d.start(0, Tokens{5, 6, 7, 8, 9, 1, 2, 3, 5});
  EXPECT_EQ(draft(d, req(0, 8)).tokens, (Tokens{6, 7, 8, 9}));
  // Matched by two tokens (1 5): cap 8.
  SuffixDrafter two({});
  two.start(0, Tokens{1, 5, 6, 7, 8, 9, 2, 3, 4, 1, 5});
  EXPECT_EQ(draft(two, req(0, 8)).tokens, (Tokens{6, 7, 8, 9, 2, 3, 4, 1}));
  EXPECT_EQ(draft(two, req(0, 3)).tokens, (Tokens{6, 7, 8})) << "k caps it too";
  // Tighter caps per matched token: ceil(1.5 x 1) = 2, 1 x 1 = 1.
  SuffixDrafter loose(SuffixDrafterOptions{.depth_per_match = 1.5});
  loose.start(0, Tokens{5, 6, 7, 8, 9, 1, 2, 3, 5});
  EXPECT_EQ(draft(loose, req(0, 8)).tokens, (Tokens{6, 7}));
  SuffixDrafter one(SuffixDrafterOptions{.depth_per_match = 1});
  one.start(0, Tokens{5, 6, 7, 8, 9, 1, 2, 3, 5});
  EXPECT_EQ(draft(one, req(0, 8)).tokens, (Tokens{6}));
}

TEST(SuffixDrafter, ABranchFromAnUnsureFirstTokenIsCut) {
  // The text ends in "5 7", matched by "7" alone: after 7, 8 three times and 9 once; 8 goes on
  // 1 2 every time. The likeliest branch starts from an unsure first token (3 of 4), so it is
  // cut to one token; with the cut off it goes on.
  const Tokens text = {7, 8, 1, 2, 7, 8, 1, 2, 7, 9, 3, 7, 8, 1, 2, 5, 7};
  SuffixDrafter d(SuffixDrafterOptions{.depth_per_match = kDeep});
  d.start(0, text);
  EXPECT_EQ(draft(d, req(0, 4)).tokens, (Tokens{8}));
  SuffixDrafter two(SuffixDrafterOptions{.depth_per_match = kDeep, .unsure_root_depth = 2});
  two.start(0, text);
  EXPECT_EQ(draft(two, req(0, 4)).tokens, (Tokens{8, 1}));
  SuffixDrafter off(SuffixDrafterOptions{.depth_per_match = kDeep, .unsure_root_depth = 0});
  off.start(0, text);
  EXPECT_EQ(draft(off, req(0, 4)).tokens, (Tokens{8, 1, 2, 7}));
  // A first token the text always took is not cut: after 7 8 (three times), 1 2 and then 7.
  EXPECT_EQ(draft(d, req(0, 3, 1, {8})).tokens, (Tokens{1, 2, 7}));
  EXPECT_THROW(SuffixDrafter(SuffixDrafterOptions{.unsure_root_depth = -1}), Error);
}

TEST(SuffixDrafter, TheBetterCandidateOfOwnTextAndEarlierRequestsWins) {
  // An earlier request continued "1 2 3 4" with 9; the own text has only "4" followed by 7 (a
  // shorter match), and wins anyway: both candidates are certain, and the own text breaks ties.
  SuffixDrafter d({});
  d.start(0, Tokens{1, 2, 3, 4, 9, 9});
  d.finish(0);
  d.start(1, Tokens{4, 7, 0, 1, 2, 3, 4});
  EXPECT_EQ(draft(d, req(1, 1)).tokens, (Tokens{7}));
  // When the own text is unsure (after 4: 7 and 8 once each, score 1/2), the certain earlier
  // request wins.
  d.start(2, Tokens{4, 7, 4, 8, 1, 2, 3, 4});
  EXPECT_EQ(draft(d, req(2, 1)).tokens, (Tokens{9}));
}

TEST(SuffixDrafter, AnEarlierRequestMatchedByOneTokenIsCut) {
  // An earlier request went on "5 6 7 8 9" after 5; the new request ends in 5, matched by that
  // one token alone: its first token is offered, the rest cut. Matched by two (4 5), it is not.
  const Tokens earlier = {4, 5, 6, 7, 8, 9};
  SuffixDrafter d({});
  d.start(0, earlier);
  d.finish(0);
  d.start(1, Tokens{1, 5});
  EXPECT_EQ(draft(d, req(1, 4)).tokens, (Tokens{6}));
  d.start(2, Tokens{1, 4, 5});
  EXPECT_EQ(draft(d, req(2, 4)).tokens, (Tokens{6, 7, 8, 9}));
  // The same one-token match in the own text is not cut.
  SuffixDrafter own({});
  own.start(0, Tokens{4, 5, 6, 7, 8, 9, 1, 5});
  EXPECT_EQ(draft(own, req(0, 4)).tokens, (Tokens{6, 7, 8, 9}));
  // With the rule off (a sure match of 0 tokens), the earlier request's branch goes on.
  SuffixDrafter off(SuffixDrafterOptions{.earlier_sure_match = 0});
  off.start(0, earlier);
  off.finish(0);
  off.start(1, Tokens{1, 5});
  EXPECT_EQ(draft(off, req(1, 4)).tokens, (Tokens{6, 7, 8, 9}));
}

TEST(SuffixDrafter, AMinorityFirstTokenOfEarlierRequestsIsNotOffered) {
  // Earlier requests went on after "2 3" with 7, 8 and 9 once each: the likeliest, 9 (the
  // latest), took a third of the continuations, under the half needed, so nothing is offered.
  // Two more requests with 7 give it 3 of 5: 7 is offered, alone (unsure).
  const std::vector<Tokens> three = {{2, 3, 7, 1}, {2, 3, 8, 1}, {2, 3, 9, 1}};
  SuffixDrafter d({});
  int32_t seq = 0;
  for (const Tokens& t : three) {
    d.start(seq, t);
    d.finish(seq++);
  }
  d.start(seq, Tokens{4, 2, 3});
  EXPECT_TRUE(draft(d, req(seq++, 3)).empty());
  for (int i = 0; i < 2; ++i) {
    d.start(seq, Tokens{2, 3, 7, 1});
    d.finish(seq++);
  }
  d.start(seq, Tokens{4, 2, 3});
  EXPECT_EQ(draft(d, req(seq++, 3)).tokens, (Tokens{7}));
  // The own text's minority first token is offered (after 2 3: 7, 8, 9 once each; the latest).
  SuffixDrafter own(SuffixDrafterOptions{.cache_tokens = 0});
  own.start(0, Tokens{2, 3, 7, 1, 2, 3, 8, 1, 2, 3, 9, 1, 4, 2, 3});
  EXPECT_EQ(draft(own, req(0, 3)).tokens, (Tokens{9}));
  // With the rule off, the earlier requests' 9 is offered.
  SuffixDrafter off(SuffixDrafterOptions{.earlier_unsure_min_share = 0});
  seq = 0;
  for (const Tokens& t : three) {
    off.start(seq, t);
    off.finish(seq++);
  }
  off.start(seq, Tokens{4, 2, 3});
  EXPECT_EQ(draft(off, req(seq, 3)).tokens, (Tokens{9}));
}

TEST(SuffixDrafter, NothingToOfferFallsBackOnAnotherSpellingOfTheLastToken) {
  // Tokens 5 and 6 spell one word ("the", "The"); 8 is a spelling of its own. The text ends in 6,
  // which never occurred before: 5 did, twice, followed last by 9.
  auto classes = std::make_shared<std::vector<int32_t>>(std::vector<int32_t>{0, 1, 2, 3, 4, 5, 5,
                                                                             7, 8, 9});
  const Tokens text = {5, 7, 1, 5, 9, 2, 6};
  SuffixDrafter d(SuffixDrafterOptions{.spelling_classes = classes});
  d.start(0, text);
  DraftRequest r = req(0, 4);
  r.predict_top = 2;
  const DraftTree t = draft(d, r);
  EXPECT_EQ(t.tokens, (Tokens{9})) << "the latest other spelling's successor, alone";
  ASSERT_EQ(t.predicted.size(), 1u);
  EXPECT_EQ(t.predicted[0].tokens[0].id, 9);
  // Through the request's suffix: the text then ends in 5 (a match: no fallback needed) or 8.
  EXPECT_EQ(draft(d, req(0, 1, 1, {2, 5})).tokens, (Tokens{9}));
  EXPECT_TRUE(draft(d, req(0, 4, 1, {8})).empty()) << "8 has no other spelling";
  // Without classes, nothing is offered; a token past the classes' vocabulary has no spelling.
  SuffixDrafter plain({});
  plain.start(0, text);
  EXPECT_TRUE(draft(plain, req(0, 4)).empty());
  d.start(1, Tokens{5, 7, 1, 42});
  EXPECT_TRUE(draft(d, req(1, 4)).empty());
  EXPECT_THROW(SuffixDrafter(SuffixDrafterOptions{
                   .spelling_classes = std::make_shared<std::vector<int32_t>>(
                       std::vector<int32_t>{0, 3})}),
               Error)
      << "a class outside the vocabulary";
}

TEST(SuffixDrafter, RefusesBadOptionsAndUnknownSequences) {
  EXPECT_THROW(SuffixDrafter(SuffixDrafterOptions{.earlier_sure_match = -1}), Error);
  EXPECT_THROW(SuffixDrafter(SuffixDrafterOptions{.earlier_unsure_min_share = -0.1}), Error);
  EXPECT_THROW(SuffixDrafter(SuffixDrafterOptions{.earlier_unsure_min_share = 1.5}), Error);
  EXPECT_THROW(SuffixDrafter(SuffixDrafterOptions{.min_prob = 0}), Error);
  EXPECT_THROW(SuffixDrafter(SuffixDrafterOptions{.min_prob = 1.5}), Error);
  EXPECT_THROW(SuffixDrafter(SuffixDrafterOptions{.cache_tokens = -5}), Error);
  SuffixDrafter d({});
  EXPECT_THROW(d.commit(3, Tokens{1}), Error);
  EXPECT_THROW(draft(d, req(3, 2)), Error);
}

}  // namespace
}  // namespace ssd
