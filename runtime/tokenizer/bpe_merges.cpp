// Heap-driven BPE merging over a doubly linked list of symbols (see bpe_merges.h).
#include "runtime/tokenizer/bpe_merges.h"

#include <algorithm>
#include <functional>

namespace ssd {

void BpeMerges::add(int32_t left, int32_t right, int32_t rank, int32_t result) {
  auto [it, inserted] = table_.try_emplace(key(left, right), Merge{rank, result});
  if (!inserted && rank < it->second.rank) it->second = Merge{rank, result};
}

const BpeMerges::Merge* BpeMerges::find(int32_t l, int32_t r) const {
  if (l < 0 || r < 0) return nullptr;
  auto it = table_.find(key(l, r));
  return it == table_.end() ? nullptr : &it->second;
}

void BpeMerges::apply(std::vector<int32_t>& symbols) const {
  const auto n = static_cast<int32_t>(symbols.size());
  if (n < 2) return;
  struct Candidate {
    int32_t rank;
    int32_t pos;  // index of the left symbol; original indices keep left-to-right order
    int32_t left, right;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  // Scratch reused across calls (this runs once per uncached word).
  thread_local std::vector<Candidate> heap;                // min-heap on (rank, pos)
  thread_local std::vector<int32_t> next, prev;            // [n] list of live symbols; -1 = none
  heap.clear();
  next.resize(static_cast<size_t>(n));
  prev.resize(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) {
    next[i] = i + 1 < n ? i + 1 : -1;
    prev[i] = i - 1;
  }
  auto push = [&](int32_t l) {
    if (l < 0 || next[l] < 0) return;
    const int32_t r = next[l];
    if (const Merge* m = find(symbols[l], symbols[r])) {
      heap.push_back({m->rank, l, symbols[l], symbols[r]});
      std::push_heap(heap.begin(), heap.end(), std::greater<>());
    }
  };
  for (int32_t i = 0; i + 1 < n; ++i) push(i);

  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), std::greater<>());
    const Candidate c = heap.back();
    heap.pop_back();
    const int32_t r = next[c.pos];
    // Dead left symbols are marked with symbols[] = -1 below, so this also rejects them.
    if (symbols[c.pos] != c.left || r < 0 || symbols[r] != c.right) continue;
    symbols[c.pos] = find(c.left, c.right)->result;
    symbols[r] = -1;
    next[c.pos] = next[r];
    if (next[r] >= 0) prev[next[r]] = c.pos;
    push(prev[c.pos]);
    push(c.pos);
  }
  size_t w = 0;
  for (int32_t i = 0; i >= 0 && i < n; i = next[i]) symbols[w++] = symbols[i];
  symbols.resize(w);
}

}  // namespace ssd
