// The suffix drafter's structures against brute force:
//   - SuffixAutomaton: on random token strings (alphabets of 2, 3 and 7 tokens so repeats are
//     common; documents of awkward lengths 1, 13, 97, 250 ...), for many random queries, the
//     longest suffix of the query that occurs in some document (never across a document end),
//     and for it every continuation token with the number of its occurrences followed by that
//     token, and the end of its latest occurrence, equal a brute-force scan of the documents
//     exactly; state and transition counts stay within the automaton bounds (2N states, 3N
//     transitions);
//   - SuffixCache: documents beyond the budget evict the oldest ones, the tokens held never
//     exceed the budget, the bytes held stay within a fixed multiple of it, and evicted text is
//     no longer matched while recent text is.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "runtime/core/error.h"
#include "runtime/drafters/suffix_automaton.h"
#include "runtime/drafters/suffix_cache.h"

namespace ssd {
namespace {

using Doc = std::vector<int32_t>;

bool occurs_at(const Doc& d, size_t at, std::span<const int32_t> pat) {
  return at + pat.size() <= d.size() && std::equal(pat.begin(), pat.end(), d.begin() + at);
}

// Longest suffix of q occurring in some document, by trying every length.
size_t brute_longest(const std::vector<Doc>& docs, const Doc& q) {
  for (size_t len = q.size(); len > 0; --len) {
    std::span<const int32_t> pat(q.data() + q.size() - len, len);
    for (const Doc& d : docs)
      for (size_t at = 0; at + len <= d.size(); ++at)
        if (occurs_at(d, at, pat)) return len;
  }
  return 0;
}

std::map<int32_t, int64_t> brute_continuations(const std::vector<Doc>& docs,
                                               std::span<const int32_t> pat) {
  std::map<int32_t, int64_t> out;
  for (const Doc& d : docs)
    for (size_t at = 0; at + pat.size() < d.size(); ++at)
      if (occurs_at(d, at, pat)) out[d[at + pat.size()]]++;
  return out;
}

// The end of the latest occurrence in the text the automaton holds: the documents each followed
// by a separator.
int32_t brute_last_end(const std::vector<Doc>& docs, std::span<const int32_t> pat) {
  int32_t offset = 0, last = 0;
  for (const Doc& d : docs) {
    for (size_t at = 0; at + pat.size() <= d.size(); ++at)
      if (occurs_at(d, at, pat)) last = offset + static_cast<int32_t>(at + pat.size());
    offset += static_cast<int32_t>(d.size()) + 1;
  }
  return last;
}

int64_t brute_count(const std::vector<Doc>& docs, std::span<const int32_t> pat) {
  int64_t n = 0;
  for (const Doc& d : docs)
    for (size_t at = 0; at + pat.size() <= d.size(); ++at) n += occurs_at(d, at, pat) ? 1 : 0;
  return n;
}

Doc random_doc(std::mt19937& rng, size_t len, int32_t alphabet) {
  std::uniform_int_distribution<int32_t> tok(0, alphabet - 1);
  Doc d(len);
  for (auto& t : d) t = tok(rng) * 1000 + 7;  // sparse ids: the table must not assume density
  return d;
}

struct Case {
  int32_t alphabet;
  std::vector<size_t> doc_lengths;
};

TEST(SuffixAutomaton, MatchesAndContinuationsEqualBruteForce) {
  const std::vector<Case> cases = {
      {2, {1}}, {2, {13, 1, 97}}, {3, {250}}, {3, {31, 31, 77, 5}}, {7, {199, 3, 61}},
      {7, {1, 2, 3, 4, 5, 6, 7, 8, 9}}};
  std::mt19937 rng(1234);
  for (const Case& c : cases) {
    SuffixAutomaton a;
    std::vector<Doc> docs;
    int64_t n = 0;
    for (size_t len : c.doc_lengths) {
      docs.push_back(random_doc(rng, len, c.alphabet));
      a.append(docs.back());
      a.end_document();
      n += static_cast<int64_t>(len);
    }
    ASSERT_EQ(a.tokens(), n);
    const int64_t with_separators = n + static_cast<int64_t>(docs.size());
    EXPECT_LE(a.states(), 2 * with_separators + 1);
    EXPECT_LE(a.transitions(), 3 * with_separators);
    std::uniform_int_distribution<size_t> qlen(1, 23);
    for (int trial = 0; trial < 300; ++trial) {
      // Queries: random, or a random document's substring with a random tail (long matches).
      Doc q = random_doc(rng, qlen(rng), c.alphabet + 1);  // may hold a token never seen
      if (trial % 2 == 0) {
        const Doc& d = docs[rng() % docs.size()];
        const size_t from = rng() % d.size(), len = 1 + rng() % (d.size() - from);
        Doc head(d.begin() + from, d.begin() + from + len);
        head.insert(head.end(), q.begin(), q.begin() + trial % 3);
        q = head;
      }
      const size_t want = brute_longest(docs, q);
      const SuffixAutomaton::Match m = a.match(q);
      ASSERT_EQ(static_cast<size_t>(m.length), want) << "alphabet " << c.alphabet << " trial "
                                                     << trial;
      std::span<const int32_t> pat(q.data() + q.size() - want, want);
      if (want > 0) {
        EXPECT_EQ(a.count(m.state), brute_count(docs, pat)) << "trial " << trial;
        EXPECT_EQ(a.last_end(m.state), brute_last_end(docs, pat)) << "trial " << trial;
      }
      std::vector<std::pair<int32_t, int64_t>> got;
      a.continuations(m.state, got);
      const std::map<int32_t, int64_t> got_map(got.begin(), got.end());
      EXPECT_EQ(got_map.size(), got.size()) << "a token listed twice";
      if (want > 0) {
        EXPECT_EQ(got_map, brute_continuations(docs, pat)) << "trial " << trial;
      }
      // Stepping along a continuation reaches the state of the longer pattern.
      for (const auto& [t, k] : got) {
        const int32_t next = a.step(m.state, t);
        ASSERT_NE(next, -1);
        EXPECT_EQ(a.count(next), k);
      }
    }
  }
}

TEST(SuffixAutomaton, NoMatchCrossesADocumentEnd) {
  SuffixAutomaton a;
  a.append(std::vector<int32_t>{1, 2, 3});
  a.end_document();
  a.append(std::vector<int32_t>{4, 5});
  a.end_document();
  EXPECT_EQ(a.match(std::vector<int32_t>{3, 4}).length, 1);  // "4" alone, not "3 4"
  const auto m = a.match(std::vector<int32_t>{2, 3});
  EXPECT_EQ(m.length, 2);
  std::vector<std::pair<int32_t, int64_t>> c;
  a.continuations(m.state, c);
  EXPECT_TRUE(c.empty()) << "the document end is no continuation";
  EXPECT_THROW(a.append(-3), Error);
}

TEST(SuffixCache, EvictionKeepsTheTokensAndBytesWithinTheBudget) {
  constexpr int64_t kBudget = 4000;
  SuffixCache cache(SuffixCacheOptions{.max_tokens = kBudget, .segments = 4});
  std::mt19937 rng(99);
  std::vector<Doc> docs;
  int64_t most_bytes = 0;
  for (int i = 0; i < 120; ++i) {
    docs.push_back(random_doc(rng, 17 + rng() % 150, 50));
    cache.add(docs.back());
    ASSERT_LE(cache.tokens(), kBudget) << "after document " << i;
    most_bytes = std::max(most_bytes, cache.bytes());
  }
  EXPECT_GT(cache.segments_evicted(), 0);
  EXPECT_GE(cache.tokens(), kBudget / 2) << "eviction drops a quarter at a time, not everything";
  // 2 states (24 B) + 3 transitions (8 B listed, 12 B x 2 tabled at load <= 1/2, capacity
  // doubling) a token: a few hundred bytes a token at most.
  EXPECT_LE(most_bytes, 400 * kBudget) << most_bytes << " bytes";
  // The newest document is matched whole; the first one (evicted long ago) is not.
  auto longest = [&](const Doc& q) {
    int32_t best = 0;
    for (const auto& seg : cache.segments()) best = std::max(best, seg.match(q).length);
    return best;
  };
  EXPECT_EQ(longest(docs.back()), static_cast<int32_t>(docs.back().size()));
  EXPECT_LT(longest(docs.front()), 10) << "random text over 50 tokens: only short chance matches";
  // A document longer than a segment keeps its tail.
  const Doc big = random_doc(rng, 3 * kBudget / 8 + 2000, 50);
  cache.add(big);
  EXPECT_LE(cache.tokens(), kBudget);
  const Doc tail(big.end() - 100, big.end());
  EXPECT_EQ(longest(tail), 100);
  EXPECT_THROW(SuffixCache(SuffixCacheOptions{.max_tokens = -1}), Error);
  SuffixCache off(SuffixCacheOptions{.max_tokens = 0});
  off.add(big);
  EXPECT_EQ(off.tokens(), 0);
  EXPECT_TRUE(off.segments().empty());
}

}  // namespace
}  // namespace ssd
