// The online suffix automaton construction (one new state per token, a clone where a class
// splits), with transitions in one open-addressing table and occurrence counts kept online.
#include "runtime/drafters/suffix_automaton.h"

#include "runtime/core/error.h"

namespace ssd {
namespace {

constexpr uint64_t kEmpty = ~uint64_t{0};

uint64_t key_of(int32_t state, int32_t token) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(state)) << 32) |
         static_cast<uint32_t>(token);
}

uint64_t mix(uint64_t x) {  // splitmix64 finaliser: spreads sequential states and tokens
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

SuffixAutomaton::SuffixAutomaton() {
  add_state(0, -1);
  keys_.assign(64, kEmpty);
  values_.assign(64, -1);
}

int32_t SuffixAutomaton::add_state(int32_t len, int32_t link) {
  SSD_CHECK(states_.size() < static_cast<size_t>(INT32_MAX), "suffix automaton: too many states");
  states_.push_back(State{len, link, -1, 0, 0});
  return static_cast<int32_t>(states_.size() - 1);
}

int32_t SuffixAutomaton::find(int32_t from, int32_t token) const {
  const uint64_t key = key_of(from, token);
  const size_t mask = keys_.size() - 1;
  for (size_t i = mix(key) & mask;; i = (i + 1) & mask) {
    if (keys_[i] == key) return values_[i];
    if (keys_[i] == kEmpty) return -1;
  }
}

void SuffixAutomaton::set_target(int32_t from, int32_t token, int32_t to) {
  const uint64_t key = key_of(from, token);
  const size_t mask = keys_.size() - 1;
  for (size_t i = mix(key) & mask;; i = (i + 1) & mask) {
    if (keys_[i] == key) {
      values_[i] = to;
      return;
    }
    SSD_CHECK(keys_[i] != kEmpty, "suffix automaton: redirecting a missing transition");
  }
}

void SuffixAutomaton::grow_table() {
  std::vector<uint64_t> keys(keys_.size() * 2, kEmpty);
  std::vector<int32_t> values(keys.size(), -1);
  const size_t mask = keys.size() - 1;
  for (size_t j = 0; j < keys_.size(); ++j) {
    if (keys_[j] == kEmpty) continue;
    size_t i = mix(keys_[j]) & mask;
    while (keys[i] != kEmpty) i = (i + 1) & mask;
    keys[i] = keys_[j];
    values[i] = values_[j];
  }
  keys_.swap(keys);
  values_.swap(values);
}

void SuffixAutomaton::add_edge(int32_t from, int32_t token, int32_t to) {
  if (2 * (table_used_ + 1) > static_cast<int64_t>(keys_.size())) grow_table();  // load <= 1/2
  const uint64_t key = key_of(from, token);
  const size_t mask = keys_.size() - 1;
  size_t i = mix(key) & mask;
  while (keys_[i] != kEmpty) i = (i + 1) & mask;
  keys_[i] = key;
  values_[i] = to;
  ++table_used_;
  State& s = states_[static_cast<size_t>(from)];
  edges_.push_back(Edge{token, s.first_edge});
  s.first_edge = static_cast<int32_t>(edges_.size() - 1);
}

void SuffixAutomaton::extend(int32_t token) {
  const int32_t cur = add_state(states_[static_cast<size_t>(last_)].len + 1, -1);
  int32_t p = last_;
  while (p != -1 && find(p, token) == -1) {
    add_edge(p, token, cur);
    p = states_[static_cast<size_t>(p)].link;
  }
  if (p == -1) {
    states_[static_cast<size_t>(cur)].link = kRoot;
  } else {
    const int32_t q = find(p, token);
    if (states_[static_cast<size_t>(p)].len + 1 == states_[static_cast<size_t>(q)].len) {
      states_[static_cast<size_t>(cur)].link = q;
    } else {
      // q's class splits: its strings of length <= len(p) + 1 now also end here.
      const int32_t clone =
          add_state(states_[static_cast<size_t>(p)].len + 1, states_[static_cast<size_t>(q)].link);
      states_[static_cast<size_t>(clone)].count = states_[static_cast<size_t>(q)].count;
      states_[static_cast<size_t>(clone)].last_end = states_[static_cast<size_t>(q)].last_end;
      for (int32_t e = states_[static_cast<size_t>(q)].first_edge; e != -1;
           e = edges_[static_cast<size_t>(e)].next) {
        const int32_t t = edges_[static_cast<size_t>(e)].token;
        add_edge(clone, t, find(q, t));
      }
      while (p != -1 && find(p, token) == q) {
        set_target(p, token, clone);
        p = states_[static_cast<size_t>(p)].link;
      }
      states_[static_cast<size_t>(q)].link = clone;
      states_[static_cast<size_t>(cur)].link = clone;
    }
  }
  last_ = cur;
  // The new end position belongs to every class on cur's suffix-link path.
  const int32_t end = states_[static_cast<size_t>(cur)].len;
  for (int32_t s = cur; s != -1; s = states_[static_cast<size_t>(s)].link) {
    states_[static_cast<size_t>(s)].count++;
    states_[static_cast<size_t>(s)].last_end = end;
  }
}

void SuffixAutomaton::append(int32_t token) {
  SSD_CHECK(token >= 0, "suffix automaton: token {} is negative", token);
  extend(token);
  ++tokens_;
}

void SuffixAutomaton::append(std::span<const int32_t> tokens) {
  for (int32_t t : tokens) append(t);
}

void SuffixAutomaton::end_document() {
  if (last_ == kRoot) return;
  extend(kSeparator);
}

SuffixAutomaton::Match SuffixAutomaton::match(std::span<const int32_t> query) const {
  Match m;
  for (int32_t t : query) {
    if (t < 0) {  // never in the text as a token: nothing ending here matches
      m = Match{};
      continue;
    }
    for (;;) {
      const int32_t next = find(m.state, t);
      if (next != -1) {
        m.state = next;
        m.length++;
        break;
      }
      if (m.state == kRoot) break;  // t never occurs: the empty match
      m.state = states_[static_cast<size_t>(m.state)].link;
      m.length = states_[static_cast<size_t>(m.state)].len;
    }
  }
  return m;
}

int32_t SuffixAutomaton::step(int32_t state, int32_t token) const {
  return token < 0 ? -1 : find(state, token);
}

void SuffixAutomaton::continuations(int32_t state,
                                    std::vector<std::pair<int32_t, int64_t>>& out) const {
  out.clear();
  for (int32_t e = states_[static_cast<size_t>(state)].first_edge; e != -1;
       e = edges_[static_cast<size_t>(e)].next) {
    const int32_t t = edges_[static_cast<size_t>(e)].token;
    if (t == kSeparator) continue;
    out.emplace_back(t, states_[static_cast<size_t>(find(state, t))].count);
  }
}

int64_t SuffixAutomaton::bytes() const {
  return static_cast<int64_t>(
      states_.capacity() * sizeof(State) + edges_.capacity() * sizeof(Edge) +
      keys_.capacity() * sizeof(uint64_t) + values_.capacity() * sizeof(int32_t));
}

}  // namespace ssd
