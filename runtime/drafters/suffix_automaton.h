// The suffix structure of the suffix drafter (after "SuffixDecoding: A Model-Free Approach to
// Speeding Up Large-Language Model Inference"): a suffix automaton over a growing token text made
// of documents (a prompt, a generated output), with, for every state, how often its strings
// occur. It answers the two questions the drafter asks:
//   - match(): the longest suffix of a query that occurs somewhere in the text (its state and
//     length), found in one pass over the query by following suffix links on a mismatch;
//   - continuations(state): the tokens that follow that suffix in the text, each with the number
//     of its occurrences followed by it (the empirical continuation frequencies).
//
// Why an automaton rather than a suffix tree: it is built online one token at a time in
// amortised O(1) (a sequence's own output grows every round), it has at most 2N states and 3N
// transitions for N tokens, and its states are exactly the classes of substrings with the same
// continuations, so a match lands on a state whose transitions and counts are the continuation
// statistics: no tree walk below a match point, no edge labels. A suffix tree would give the
// same answers with more code (Ukkonen's active point) and more memory per token.
//
// Occurrence counts (and the latest occurrence, for recency) are kept online: appending a token
// adds its end position to every state on the suffix-link path of the new state (O(that path);
// short on text, long only on long exact repeats). Documents are separated by a separator that no
// query contains, so no match crosses a document boundary and no continuation runs into the next
// document.
//
// There is no deletion: the drafter bounds memory by keeping several automata of bounded size and
// dropping the oldest whole (suffix_cache.h).
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace ssd {

class SuffixAutomaton {
 public:
  static constexpr int32_t kRoot = 0;

  SuffixAutomaton();

  // Appends a token (>= 0) to the current document.
  void append(int32_t token);
  void append(std::span<const int32_t> tokens);
  // Closes the current document: later text never continues or matches across it.
  void end_document();

  struct Match {
    int32_t state = kRoot;
    int32_t length = 0;  // tokens of the query's suffix matched (0: nothing matched)
  };
  // The longest suffix of `query` that occurs in the text.
  Match match(std::span<const int32_t> query) const;
  // The state reached from `state` by `token`, or -1 when the text never continues that way.
  int32_t step(int32_t state, int32_t token) const;
  // A shorter match: the state of the longest suffix of `state`'s strings in another class
  // (-1 from the root), and that suffix's length.
  int32_t link(int32_t state) const { return states_[static_cast<size_t>(state)].link; }
  int32_t length(int32_t state) const { return states_[static_cast<size_t>(state)].len; }
  // Occurrences (end positions) of `state`'s strings in the text.
  int64_t count(int32_t state) const { return states_[static_cast<size_t>(state)].count; }
  // The end of their most recent occurrence: the length of the text up to it (separators
  // included), so a larger value is a later occurrence.
  int32_t last_end(int32_t state) const { return states_[static_cast<size_t>(state)].last_end; }
  // (token, occurrences of the state's strings followed by token), document ends excluded,
  // in no particular order. Cleared first.
  void continuations(int32_t state, std::vector<std::pair<int32_t, int64_t>>& out) const;

  int64_t tokens() const { return tokens_; }  // tokens appended (separators excluded)
  int64_t states() const { return static_cast<int64_t>(states_.size()); }
  int64_t transitions() const { return static_cast<int64_t>(edges_.size()); }
  // Bytes held by the structure's arrays (capacity, not size).
  int64_t bytes() const;

 private:
  static constexpr int32_t kSeparator = -1;
  struct State {
    int32_t len = 0;
    int32_t link = -1;
    int32_t first_edge = -1;  // head of this state's list in edges_
    int32_t last_end = 0;     // text length at the end of the latest occurrence
    int64_t count = 0;
  };
  struct Edge {
    int32_t token;
    int32_t next;  // next edge of the same state, -1 at the end
  };

  void extend(int32_t token);
  int32_t add_state(int32_t len, int32_t link);
  void add_edge(int32_t from, int32_t token, int32_t to);
  int32_t find(int32_t from, int32_t token) const;  // target or -1
  void set_target(int32_t from, int32_t token, int32_t to);
  void grow_table();

  std::vector<State> states_;
  std::vector<Edge> edges_;  // per-state lists, for enumerating a state's continuations
  // Open-addressing table (state, token) -> target, linear probing, for O(1) steps.
  std::vector<uint64_t> keys_;  // kEmpty or (state << 32 | uint32 token)
  std::vector<int32_t> values_;
  int64_t table_used_ = 0;
  int32_t last_ = kRoot;
  int64_t tokens_ = 0;
};

}  // namespace ssd
