// The merge loop shared by both BPE flavours. A word arrives as a sequence of symbol ids (one per
// byte for byte-level BPE, one per character for SentencePiece); the adjacent pair with the lowest
// rank is merged, leftmost first among equal ranks, until no listed pair remains. Byte-level
// vocabularies give ranks directly (the merges list); SentencePiece ones give scores, which the
// tokenizer turns into ranks, so one loop serves both.
//
// A min-heap of candidate pairs keeps long words at O(n log n); stale heap entries are detected
// by re-checking the two ids, which is exact because a pair's rank depends only on its ids.
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace ssd {

class BpeMerges {
 public:
  // Registers left+right -> result at `rank`; a repeated pair keeps its lowest rank.
  void add(int32_t left, int32_t right, int32_t rank, int32_t result);
  size_t size() const { return table_.size(); }

  // Merges `symbols` in place. Negative ids (characters with no token) never merge.
  void apply(std::vector<int32_t>& symbols) const;

 private:
  struct Merge {
    int32_t rank;
    int32_t result;
  };
  static uint64_t key(int32_t l, int32_t r) {
    return static_cast<uint64_t>(static_cast<uint32_t>(l)) << 32 | static_cast<uint32_t>(r);
  }
  const Merge* find(int32_t l, int32_t r) const;
  std::unordered_map<uint64_t, Merge> table_;
};

}  // namespace ssd
