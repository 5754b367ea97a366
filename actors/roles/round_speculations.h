// One round's speculations on the target leader, as both leaders of a split run take them:
// RemoteDecoder (remote_decode.h: `ssd generate` and `ssd bench` with drafter ranks) and the
// server's RemoteEngine (actors/serve/remote_engine.h). One implementation, so the two cannot
// drift apart on what the protocol allows:
//   - the leader asks each running sequence for a speculation of the length it chose for the
//     round (ask());
//   - a length of 0 is a plain decode step: the drafter sends nothing for it, and a round of
//     decode steps alone gets no answer at all (protocol.h, SpeculationMsg), so the round is
//     verified at once (answer_comes() is false);
//   - the drafter's answer must be for this round, with one entry for every sequence asked a
//     length above 0 and none for the others (take()), except those whose speculation the
//     leader already took from the drafter's push (give(): no entry for them; a round whose
//     every speculation was pushed gets no answer);
//   - each sequence's speculation is verified as a tree cut to the length asked, itself capped by
//     the tokens its request has left after the one the round emits anyway (a prefix of a chain
//     keeps every node's q, so it verifies exactly), and checked against the vocabulary and --k
//     (tree()).
#pragma once

#include <cstdint>
#include <map>

#include "actors/transport/protocol.h"
#include "runtime/spec/draft_tree.h"

namespace ssd {

class RoundSpeculations {
 public:
  // round: the round the answer is for; k_max: --k (the most tokens a speculation may hold);
  // vocab: the target's vocabulary size.
  RoundSpeculations(int64_t round, int32_t k_max, int32_t vocab)
      : round_(round), k_max_(k_max), vocab_(vocab) {}

  // Sequence `seq` takes part in the round, asked for `length` tokens (0: a decode step).
  void ask(int32_t seq, int32_t length);
  // Tokens asked over the round: the drafter's work the leader waits for.
  int64_t asked() const { return asked_; }
  // Whether the drafter answers this round: it does not when every length is 0, nor when every
  // sequence asked for tokens already has its speculation from the drafter's push (give()).
  bool answer_comes() const { return awaited_ > 0; }
  // Whether sequence `seq` was asked for tokens and has no speculation yet.
  bool awaits(int32_t seq) const;
  // Sequence `seq`'s speculation arrived ahead of the answer (a pushed pre-speculation that hit:
  // PrespecPush in protocol.h), or the leader drafted it (its lookup copy: a miss under --miss-at
  // leader, or any speculation once the drafter is lost); the drafter leaves it out of its
  // answer. Asked first, length > 0.
  void give(int32_t seq, SeqSpeculation&& spec);

  // Takes the drafter's answer. An entry for a sequence not asked is an error, or, with
  // `drop_unasked`, dropped: the server ends a sequence whose client left while its speculation
  // was on its way.
  void take(SpeculationMsg&& answer, bool drop_unasked = false);
  // No answer will come (the drafter is lost, and the leader has no lookup copy to draft with):
  // every sequence verifies an empty speculation, and asked() is 0.
  void take_none();

  // Sequence `seq`'s speculation as the tree to verify, cut to the length asked and to `left - 1`
  // tokens (left: the tokens its request may still emit), and checked.
  DraftTree tree(int32_t seq, int64_t left);
  // Where sequence `seq`'s speculation came from (kDecodeStep for a length of 0).
  SpecSource source(int32_t seq) const;

 private:
  struct Entry {
    int32_t length = 0;   // asked
    bool taken = false;   // its speculation arrived (or is a decode step's)
    SeqSpeculation spec;
  };
  Entry& entry(int32_t seq);
  const Entry& entry(int32_t seq) const;

  int64_t round_;
  int32_t k_max_;
  int32_t vocab_;
  int64_t asked_ = 0;
  int64_t awaited_ = 0;  // sequences asked for tokens whose speculation has not arrived
  std::map<int32_t, Entry> seqs_;
};

}  // namespace ssd
