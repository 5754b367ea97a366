// The suffix drafter's memory of earlier requests: their prompts and outputs, in suffix automata
// (suffix_automaton.h), bounded by a token budget. The budget is split into `segments` equal
// automata filled one after the other; when a new request does not fit in the youngest, a fresh
// segment starts, and past `segments` of them the oldest is dropped whole. So the oldest requests
// are evicted (about a 1/segments share of the budget at a time), nothing is rebuilt, an
// insertion costs what appending its tokens costs, and the held text never exceeds the budget
// (memory is then bounded by the automata's at most 2 states and 3 transitions a token).
// A request longer than a segment keeps its last segment-size tokens.
#pragma once

#include <cstdint>
#include <deque>
#include <span>

#include "runtime/drafters/suffix_automaton.h"

namespace ssd {

struct SuffixCacheOptions {
  int64_t max_tokens = int64_t{1} << 20;  // 0: remember nothing
  int32_t segments = 4;                   // eviction granularity: 1/segments of the budget
};

class SuffixCache {
 public:
  explicit SuffixCache(const SuffixCacheOptions& opts);

  // Remembers one finished request's text (prompt + output), evicting the oldest as needed.
  void add(std::span<const int32_t> document);

  // Oldest first.
  const std::deque<SuffixAutomaton>& segments() const { return segments_; }
  int64_t tokens() const;  // tokens held (<= max_tokens)
  int64_t bytes() const;   // bytes held by the segments' arrays
  int64_t documents_added() const { return added_; }
  int64_t segments_evicted() const { return evicted_; }
  int64_t segment_tokens() const { return segment_tokens_; }

 private:
  SuffixCacheOptions opts_;
  int64_t segment_tokens_ = 0;  // capacity of one segment
  std::deque<SuffixAutomaton> segments_;
  int64_t added_ = 0, evicted_ = 0;
};

}  // namespace ssd
