// Whether SSD's drafter pre-speculates, chosen by what it is measured to earn in this run.
//
// Pre-speculation hides drafting behind verification only when the drafter has compute the target
// does not need. On ranks that share cores with each other (or with other jobs), the branches the
// drafter rank drafts during verification take cycles from the verification itself, and a round
// can end up slower than SD's, where the drafter sits idle while the target verifies. Which case
// holds is a property of the machine and its load, so the target leader measures it: rounds run
// in blocks of `block` rounds, each block with pre-speculation on or off (off: the drafter answers
// every outcome by drafting then, as SD does; protocol.h, Outcome::prespeculate), and the switch
// keeps whichever regime has delivered more tokens per second.
//
//   warm-up   the first 2 * kWarmupPairs blocks alternate on, off, on, off, ...;
//   then      the regime with the higher rate (the median block rate of its latest kKeep blocks)
//             runs, and every `explore_every`-th block runs the other one, so a change in load
//             (another job ending) is noticed.
//
// Rates are tokens emitted per second of the leader's rounds (its wait for the speculation plus
// verification), over a block: the cost of pre-speculating shows up both as a shorter wait (hits)
// and as a slower verification (contention), and only their sum decides. The first round of a
// block still feels the previous block's regime (a miss after off, the last branches after on);
// blocks are long enough for that to be a small part. Exactness does not depend on the switch:
// either regime answers with speculations that verify exactly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>

namespace ssd {

struct PrespecSwitchOptions {
  bool adaptive = true;       // false: pre-speculate in every round (Saguaro as published)
  int32_t block = 16;         // rounds per block
  int32_t explore_every = 6;  // after the warm-up, every n-th block runs the regime not chosen
};

class PrespecSwitch {
 public:
  static constexpr int32_t kWarmupPairs = 2;
  static constexpr size_t kKeep = 4;  // block rates kept per regime

  explicit PrespecSwitch(const PrespecSwitchOptions& opts = {});
  // The regime of the round about to be decided (the one whose outcome is being sent).
  bool on() const { return on_; }
  // A round run under on() finished: it emitted `tokens` in `seconds`.
  void observe_round(int64_t tokens, double seconds);
  // Median block rate (tokens/s) of a regime; 0 before its first block.
  double rate(bool on) const;
  int64_t blocks() const { return blocks_; }
  int64_t blocks_on() const { return blocks_on_; }

 private:
  void next_block();

  PrespecSwitchOptions opts_;
  bool on_ = true;
  int32_t rounds_ = 0;  // rounds of the current block so far
  int64_t tokens_ = 0;
  double seconds_ = 0;
  int64_t blocks_ = 0, blocks_on_ = 0;  // finished blocks, of them with pre-speculation
  std::deque<double> rates_[2];         // [off, on] latest block rates
};

}  // namespace ssd
