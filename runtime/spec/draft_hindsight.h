// Hindsight acceptance of lookup drafts: a lookup drafter (n-gram, suffix) is asked for the whole
// range and the length policy verifies only the first k of the tokens it offered; this keeps each
// offer whole and, as the sequence's tokens are emitted, counts how many of the offer's tokens the
// output repeated, position by position, until the first that differs (or the offer is used up).
// That count is what verifying the whole offer would have accepted: for greedy decoding exactly
// (a draft token is accepted iff it is the target's argmax, which is then emitted), and for
// sampling in distribution (a one-hot draft token x is accepted with probability p(x), the
// chance that the target emits x). The length policy learns from it the positions past the
// chosen k for free (runtime/spec/spec_length.h, "Hindsight").
//
// An offer is resolved by the tokens emitted after it; offers of one sequence overlap (a round's
// offer of 8 tokens may need three rounds of output), so a sequence holds a few pending ones.
// An offer still open when its sequence ends is dropped: the output stopped, it did not differ.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <vector>

namespace ssd {

class DraftHindsight {
 public:
  struct Resolved {
    int32_t offered = 0;   // tokens of the offer
    int32_t repeated = 0;  // its leading tokens the output repeated, 0..offered
    bool operator==(const Resolved&) const = default;
  };

  // seq's next emitted tokens will be judged against `offer` (its whole chain, before any cut).
  // An empty offer is ignored.
  void offer(int32_t seq, std::span<const int32_t> offer);
  // seq emitted `tokens` (in order); appends to `out` the offers they resolved.
  void emitted(int32_t seq, std::span<const int32_t> tokens, std::vector<Resolved>& out);
  // seq ended: its open offers are dropped.
  void finish(int32_t seq) { open_.erase(seq); }
  // Offers of seq not yet resolved.
  size_t pending(int32_t seq) const;

 private:
  struct Open {
    std::vector<int32_t> tokens;
    int32_t matched = 0;
  };
  std::map<int32_t, std::vector<Open>> open_;
};

}  // namespace ssd
