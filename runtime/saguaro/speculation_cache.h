// The speculation cache ("Speculative Speculative Decoding"): verification outcome -> the
// speculation pre-drafted for it. Key (sequence, k, bonus token); each entry also names the
// speculation whose outcome it answers (`parent`, that speculation's id), so an entry left over
// from an older round, or drafted for a speculation the sequence no longer has, is never served: it
// counts as a miss.
//
// The cache is replaced each round: replace() drops every entry and installs the new ones (the
// pre-speculation of one round, possibly merged from several drafter ranks). Hit/miss counters
// cover every lookup since construction.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <tuple>
#include <vector>

#include "runtime/saguaro/speculation.h"

namespace ssd {

struct CacheEntry {
  int32_t seq = 0;
  uint64_t parent = 0;  // id of the speculation whose outcome (k, bonus) this answers
  int32_t k = 0;
  int32_t bonus = 0;
  Speculation spec;  // the next round's speculation (source kCache; id set when served)
};

class SpeculationCache {
 public:
  // Drops every entry, then installs `entries`; of entries with the same key the first is kept.
  void replace(std::vector<CacheEntry> entries);
  void clear() { entries_.clear(); }

  // The entry for the outcome (k, bonus) of speculation `parent` of `seq`, or null. No counting.
  const CacheEntry* find(int32_t seq, uint64_t parent, int32_t k, int32_t bonus) const;
  // find(), counted as a hit or a miss; a hit returns a copy of the entry's speculation.
  std::optional<Speculation> lookup(int32_t seq, uint64_t parent, int32_t k, int32_t bonus);

  size_t size() const { return entries_.size(); }
  int64_t hits() const { return hits_; }
  int64_t misses() const { return misses_; }

 private:
  using Key = std::tuple<int32_t, int32_t, int32_t>;  // (seq, k, bonus)
  std::map<Key, CacheEntry> entries_;
  int64_t hits_ = 0, misses_ = 0;
};

}  // namespace ssd
