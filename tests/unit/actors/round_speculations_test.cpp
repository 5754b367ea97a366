// RoundSpeculations, the piece both split-run leaders (RemoteDecoder and the server's
// RemoteEngine) take a round's speculations with: decode steps (length 0) get no entry and a
// round of them alone no answer; the answer must be for the round, cover every sequence asked a
// length above 0 once and no other; each tree is cut to the length asked and to the tokens the
// request has left, and checked against the vocabulary.
#include "actors/roles/round_speculations.h"

#include <gtest/gtest.h>

#include <string>

#include "tests/unit/io/error_text.h"

namespace ssd {
namespace {

constexpr int32_t kK = 4, kVocab = 100;

// A chain of `n` tokens 10, 11, ... from `source`, each node's q certain of its token.
SeqSpeculation chain(int32_t seq, int32_t n, SpecSource source = SpecSource::kPrimary) {
  SeqSpeculation s;
  s.seq = seq;
  s.source = static_cast<uint8_t>(source);
  for (int32_t i = 0; i < n; ++i) {
    s.tokens.push_back(10 + i);
    ProcessedDist q;
    q.tokens = {TokenProb{10 + i, 1.0f}};
    s.q.push_back(q);
  }
  return s;
}

SpeculationMsg answer(int64_t round, std::vector<SeqSpeculation> seqs) {
  SpeculationMsg m;
  m.round = round;
  m.seqs = std::move(seqs);
  return m;
}

TEST(RoundSpeculations, DecodeStepsAloneGetNoAnswerAndEmptyTrees) {
  RoundSpeculations r(3, kK, kVocab);
  r.ask(0, 0);
  r.ask(7, 0);
  EXPECT_FALSE(r.answer_comes());
  EXPECT_EQ(r.asked(), 0);
  for (int32_t seq : {0, 7}) {
    EXPECT_EQ(r.source(seq), SpecSource::kDecodeStep);
    EXPECT_EQ(r.tree(seq, 100).size(), 0u);
  }
}

// A speculation taken from the drafter's push counts as arrived: the answer leaves it out, a
// round whose every speculation was pushed gets none, and a second copy of it is an error.
TEST(RoundSpeculations, PushedSpeculationsNeedNoAnswer) {
  RoundSpeculations all(5, kK, kVocab);
  all.ask(1, 3);
  all.ask(2, 0);
  all.give(1, chain(1, 3, SpecSource::kCache));
  EXPECT_FALSE(all.answer_comes());
  EXPECT_EQ(all.asked(), 3);  // still the tokens asked: the policy learns they cost no wait
  EXPECT_EQ(all.source(1), SpecSource::kCache);
  EXPECT_EQ(all.tree(1, 100).size(), 3u);

  RoundSpeculations some(6, kK, kVocab);
  some.ask(1, 2);
  some.ask(2, 2);
  some.give(2, chain(2, 2, SpecSource::kCache));
  EXPECT_TRUE(some.answer_comes());
  EXPECT_THROW(some.take(answer(6, {chain(1, 2), chain(2, 2)})), Error);  // 2 sent twice

  RoundSpeculations step(7, kK, kVocab);
  step.ask(3, 0);
  EXPECT_THROW(step.give(3, chain(3, 1)), Error);  // a decode step takes no speculation
}

TEST(RoundSpeculations, TreesAreCutToTheLengthAskedAndToWhatIsLeft) {
  RoundSpeculations r(1, kK, kVocab);
  r.ask(1, 3);
  r.ask(2, 4);
  r.ask(3, 0);  // a decode step beside them
  EXPECT_TRUE(r.answer_comes());
  EXPECT_EQ(r.asked(), 7);
  r.take(answer(1, {chain(1, 4), chain(2, 4, SpecSource::kCache)}));
  const DraftTree one = r.tree(1, 100);  // asked 3, sent 4: verified 3
  ASSERT_EQ(one.size(), 3u);
  EXPECT_EQ(one.tokens[2], 12);
  EXPECT_EQ(r.tree(2, 3).size(), 2u);  // 3 tokens left: the round emits one anyway
  EXPECT_EQ(r.source(2), SpecSource::kCache);
  EXPECT_EQ(r.source(3), SpecSource::kDecodeStep);
  EXPECT_EQ(r.tree(3, 100).size(), 0u);
}

TEST(RoundSpeculations, AMissingSpeculationIsAnErrorNamingSequenceAndRound) {
  RoundSpeculations r(5, kK, kVocab);
  r.ask(0, 2);
  r.ask(1, 2);
  r.take(answer(5, {chain(1, 2)}));
  EXPECT_EQ(r.tree(1, 100).size(), 2u);
  EXPECT_NE(test::error_text([&] { r.tree(0, 100); })
                .find("the drafter sent no speculation for sequence 0 in round 5"),
            std::string::npos);
}

TEST(RoundSpeculations, AnAnswerThatDisagreesWithTheAskIsAnError) {
  auto asked = [] {
    RoundSpeculations r(2, kK, kVocab);
    r.ask(0, 2);
    r.ask(1, 0);
    return r;
  };
  EXPECT_NE(test::error_text([&] { asked().take(answer(3, {chain(0, 2)})); })
                .find("drafter answered round 3 while the target is at round 2"),
            std::string::npos);
  EXPECT_NE(test::error_text([&] { asked().take(answer(2, {chain(0, 2), chain(1, 1)})); })
                .find("a speculation for sequence 1 in round 2, whose length is 0"),
            std::string::npos);
  EXPECT_NE(test::error_text([&] { asked().take(answer(2, {chain(0, 2), chain(0, 2)})); })
                .find("two speculations for sequence 0 in round 2"),
            std::string::npos);
  EXPECT_NE(test::error_text([&] { asked().take(answer(2, {chain(0, 2), chain(9, 2)})); })
                .find("a speculation for sequence 9, which is not running"),
            std::string::npos);
  // The server's leader drops the speculation of a sequence it released meanwhile.
  RoundSpeculations r = asked();
  r.take(answer(2, {chain(9, 2), chain(0, 2)}), /*drop_unasked=*/true);
  EXPECT_EQ(r.tree(0, 100).size(), 2u);
}

TEST(RoundSpeculations, ATokenOutsideTheVocabularyOrALengthAboveKIsAnError) {
  RoundSpeculations r(0, kK, kVocab);
  r.ask(0, 2);
  SeqSpeculation bad = chain(0, 2);
  bad.tokens[1] = kVocab;
  r.take(answer(0, {bad}));
  EXPECT_NE(test::error_text([&] { r.tree(0, 100); }).find("outside the vocabulary"),
            std::string::npos);
  RoundSpeculations over(0, kK, kVocab);
  EXPECT_NE(test::error_text([&] { over.ask(0, kK + 1); }).find("--k is 4"), std::string::npos);
}

TEST(RoundSpeculations, WithoutADrafterEverySequenceVerifiesAnEmptySpeculation) {
  RoundSpeculations r(4, kK, kVocab);
  r.ask(0, 3);
  r.ask(1, 0);
  r.take_none();
  EXPECT_EQ(r.asked(), 0);
  for (int32_t seq : {0, 1}) EXPECT_EQ(r.tree(seq, 100).size(), 0u);
  EXPECT_EQ(r.source(0), SpecSource::kInitial);
}

}  // namespace
}  // namespace ssd
