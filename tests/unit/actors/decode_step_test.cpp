// A length of 0 under SSD is a plain decode step on the drafter actor, agreed by protocol: the test
// plays the target leader over the loopback transport (the frames the MPI transport carries) and
// checks that the drafter rank
//   - answers nothing for a round whose sequences are all at length 0 (StartSeqs::first_k or
//     SeqOutcome::next_k): the next message it sends is the one the test asks for afterwards, and
//     channels keep their order, so no speculation was sent in between;
//   - drafts nothing for them: no Drafter::draft call at all, no branch planned or pre-speculated,
//     no lookup counted as a hit or a miss;
//   - in a round mixing lengths 0 and 2 answers exactly the sequence at 2 (with 2 tokens) and
//     pre-speculates for it alone;
//   - answers an outcome whose prespeculate flag is off (the leader's PrespecSwitch) without
//     pre-speculating after it, and pre-speculates again once the flag is back on.
#include <gtest/gtest.h>

#include <mutex>

#include "actors/roles/drafter_actor.h"
#include "actors/transport/loopback_transport.h"
#include "runtime/drafters/model_drafter.h"
#include "tests/support/temp_dir.h"
#include "tests/unit/actors/split_fixture.h"
#include "tests/unit/spec/drafting_fixture.h"

namespace ssd {
namespace {

using test::drafting::gguf_vocab;

// Records the sequence of every draft request (the actor drafts on its compute thread).
class Recording final : public Drafter {
 public:
  explicit Recording(Drafter& inner) : inner_(inner) {}
  std::string name() const override { return inner_.name(); }
  void start(int32_t seq, std::span<const int32_t> p) override { inner_.start(seq, p); }
  void commit(int32_t seq, std::span<const int32_t> t) override { inner_.commit(seq, t); }
  void finish(int32_t seq) override { inner_.finish(seq); }
  std::vector<DraftTree> draft(std::span<const DraftRequest> reqs) override {
    {
      std::lock_guard lock(mu_);
      for (const DraftRequest& r : reqs) seqs_.push_back(r.seq);
    }
    return inner_.draft(reqs);
  }
  std::vector<int32_t> drafted_for() const {
    std::lock_guard lock(mu_);
    return seqs_;
  }

 private:
  Drafter& inner_;
  mutable std::mutex mu_;
  std::vector<int32_t> seqs_;  // one entry per draft request
};

class DecodeStep : public test::split::LeaderSeatTest {
 protected:
  void SetUp() override {
    path_ = test::write_tiny_gguf(test::tiny_spec(Arch::Llama, DType::F32), tmp_.file("t.gguf"));
    ModelFile f = ModelFile::open(path_);
    ModelDrafterOptions o;
    o.target_vocab = gguf_vocab(f);  // self-drafting: the target's own model
    o.draft_vocab = gguf_vocab(f);
    o.target_logits = f.config().vocab;
    inner_ = std::make_unique<ModelDrafter>(std::move(f), *backend_, o);
    recording_ = std::make_unique<Recording>(*inner_);
    SsdDrafterOptions so;
    so.k = 4;
    so.fan_out.budget = 6;
    start_actor(*recording_, so);
  }
  // The drafter's figures; handled after every message sent before it (and after the
  // pre-speculation in progress), so its arrival also closes the window for an earlier answer.
  DrafterStatsMsg stats() {
    leader().send(1, DrafterStatsAsk{});
    const Envelope env = recv();
    EXPECT_EQ(env.kind, MsgKind::kDrafterStats) << "got " << kind_name(env.kind);
    return env.kind == MsgKind::kDrafterStats ? decode<DrafterStatsMsg>(env) : DrafterStatsMsg{};
  }
  static SeqOutcome outcome(int32_t seq, int32_t token, int32_t next_k) {
    SeqOutcome o;
    o.seq = seq;
    o.accepted = 0;  // a decode step accepts nothing; the target emits its one token
    o.emitted = {token};
    o.next_k = next_k;
    return o;
  }

  test::TempDir tmp_;
  std::string path_;
  std::unique_ptr<Backend> backend_ = make_cpu_backend(1);
  std::unique_ptr<Drafter> inner_;
  std::unique_ptr<Recording> recording_;
};

TEST_F(DecodeStep, RoundsAtLengthZeroGetNoAnswerAndNoDrafting) {
  StartSeqs start;
  start.seqs = {0, 1};
  start.prompts = {{5, 12, 19}, {6, 13, 20, 27}};
  start.emitted = {{8}, {9}};
  start.streams = {0, 1};
  start.feature_rows = {0, 0};
  start.prespeculate = true;
  start.first_k = {0, 0};
  leader().send(1, start);
  Outcome o1;
  o1.round = 1;
  o1.seqs = {outcome(0, 11, 0), outcome(1, 14, 0)};
  leader().send(1, o1);

  const DrafterStatsMsg d = stats();  // the next message: no speculation for rounds 0 and 1
  EXPECT_TRUE(recording_->drafted_for().empty()) << "a decode step drafts nothing";
  EXPECT_EQ(d.branches_planned, 0) << "nothing is pre-speculated after a decode step";
  EXPECT_EQ(d.branches, 0);
  EXPECT_EQ(d.hits + d.misses, 0) << "a decode step is neither a hit nor a miss";
  EXPECT_EQ(d.rounds, 0);

  // Round 2 asks 2 tokens of sequence 0 and a decode step of sequence 1.
  Outcome o2;
  o2.round = 2;
  o2.seqs = {outcome(0, 15, 2), outcome(1, 16, 0)};
  leader().send(1, o2);
  const Envelope env = recv();
  ASSERT_EQ(env.kind, MsgKind::kSpeculation) << "got " << kind_name(env.kind);
  const SpeculationMsg sm = decode<SpeculationMsg>(env);
  EXPECT_EQ(sm.round, 2);
  ASSERT_EQ(sm.seqs.size(), 1u) << "sequence 1 (length 0) gets no entry";
  EXPECT_EQ(sm.seqs[0].seq, 0);
  EXPECT_EQ(sm.seqs[0].tokens.size(), 2u);
  EXPECT_EQ(sm.seqs[0].source, static_cast<uint8_t>(SpecSource::kPrimary)) << "a miss: no cache";

  const DrafterStatsMsg after = stats();  // after round 2's pre-speculation
  EXPECT_EQ(after.misses, 1);
  EXPECT_EQ(after.hits, 0);
  EXPECT_GT(after.branches, 0) << "sequence 0's outcomes are pre-speculated";
  const std::vector<int32_t> seqs = recording_->drafted_for();
  ASSERT_FALSE(seqs.empty());
  for (int32_t s : seqs) EXPECT_EQ(s, 0) << "sequence 1, at length 0, was drafted for";
}

// A round that asks every sequence's full length after decode steps is answered as usual: the
// protocol's rule is per round, from the lengths the leader sent.
TEST_F(DecodeStep, ALengthAfterDecodeStepsIsAnsweredInFull) {
  StartSeqs start;
  start.seqs = {3};
  start.prompts = {{5, 12, 19, 26}};
  start.emitted = {{8}};
  start.streams = {3};
  start.feature_rows = {0};
  start.prespeculate = true;
  start.first_k = {0};
  leader().send(1, start);
  for (int64_t round = 1; round <= 3; ++round) {
    Outcome o;
    o.round = round;
    o.seqs = {outcome(3, static_cast<int32_t>(10 + round), round == 3 ? 4 : 0)};
    leader().send(1, o);
  }
  const Envelope env = recv();
  ASSERT_EQ(env.kind, MsgKind::kSpeculation) << "got " << kind_name(env.kind);
  const SpeculationMsg sm = decode<SpeculationMsg>(env);
  EXPECT_EQ(sm.round, 3) << "rounds 0..2 were decode steps and had no answer";
  ASSERT_EQ(sm.seqs.size(), 1u);
  EXPECT_EQ(sm.seqs[0].tokens.size(), 4u);
  EXPECT_EQ(sm.seqs[0].q.size(), 4u);
  stats();  // lets the pre-speculation finish before the shutdown
}

TEST_F(DecodeStep, AnOutcomeWithPreSpeculationOffIsAnsweredWithoutBranches) {
  StartSeqs start;
  start.seqs = {4};
  start.prompts = {{5, 12, 19, 26}};
  start.emitted = {{8}};
  start.streams = {4};
  start.feature_rows = {0};
  start.prespeculate = true;
  start.first_k = {2};
  leader().send(1, start);
  ASSERT_EQ(recv().kind, MsgKind::kSpeculation);
  const int64_t branches0 = stats().branches;  // after round 0's pre-speculation
  EXPECT_GT(branches0, 0);

  auto round = [&](int64_t r, bool prespeculate) {
    Outcome o;
    o.round = r;
    o.seqs = {outcome(4, static_cast<int32_t>(20 + r), 2)};
    o.prespeculate = prespeculate;
    leader().send(1, o);
    const Envelope env = recv();
    EXPECT_EQ(env.kind, MsgKind::kSpeculation) << "got " << kind_name(env.kind);
    return stats();
  };
  const DrafterStatsMsg off = round(1, false);
  EXPECT_EQ(off.branches, branches0) << "nothing pre-speculated after an outcome with it off";
  const DrafterStatsMsg miss = round(2, true);
  EXPECT_EQ(miss.misses, off.misses + 1) << "no cache after a round with pre-speculation off";
  EXPECT_GT(miss.branches, branches0) << "pre-speculation resumes with the flag";
}

}  // namespace
}  // namespace ssd
