#include "runtime/drafters/suffix_drafter.h"

#include <algorithm>
#include <cmath>

#include "runtime/core/error.h"

namespace ssd {
namespace {

using Counts = std::vector<std::pair<int32_t, int64_t>>;  // (token, occurrences)

// A position in one source's automaton: the state of the text matched so far. Sources are listed
// oldest first (the cache's segments, then the sequence's own text), so (source, last_end) orders
// occurrences by recency.
struct Cursor {
  const SuffixAutomaton* automaton;
  int32_t state;
  int32_t source;
};

// The continuations of all cursors, counts summed, likeliest first; among equally frequent ones
// the most recently seen first (recent text predicts best), then the smaller token.
Counts merged(const std::vector<Cursor>& cursors) {
  struct Entry {
    int64_t count = 0;
    std::pair<int32_t, int32_t> recency{-1, -1};  // (source, last_end) of the latest occurrence
  };
  std::map<int32_t, Entry> sum;
  Counts one;
  for (const Cursor& c : cursors) {
    c.automaton->continuations(c.state, one);
    for (const auto& [t, n] : one) {
      Entry& e = sum[t];
      e.count += n;
      const std::pair<int32_t, int32_t> r{c.source,
                                          c.automaton->last_end(c.automaton->step(c.state, t))};
      e.recency = std::max(e.recency, r);
    }
  }
  std::vector<std::pair<int32_t, Entry>> order(sum.begin(), sum.end());
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    if (a.second.count != b.second.count) return a.second.count > b.second.count;
    return a.second.recency > b.second.recency;
  });
  Counts out;
  for (const auto& [t, e] : order) out.emplace_back(t, e.count);
  return out;
}

int64_t total(const Counts& c) {
  int64_t n = 0;
  for (const auto& [t, k] : c) n += k;
  return n;
}

std::vector<Cursor> step_all(const std::vector<Cursor>& cursors, int32_t token) {
  std::vector<Cursor> out;
  for (const Cursor& c : cursors) {
    const int32_t next = c.automaton->step(c.state, token);
    if (next != -1) out.push_back(Cursor{c.automaton, next, c.source});
  }
  return out;
}

// The longest suffix of `query` that occurs in `a` followed by some token.
SuffixAutomaton::Match continued_match(const SuffixAutomaton& a, std::span<const int32_t> query) {
  SuffixAutomaton::Match m = a.match(query);
  Counts c;
  while (m.length > 0) {
    a.continuations(m.state, c);
    if (!c.empty()) break;
    m.state = a.link(m.state);
    m.length = a.length(m.state);
  }
  return m;
}

// The `top` likeliest continuations as a distribution (renormalised over those kept).
ProcessedDist top_dist(const Counts& c, int32_t top) {
  ProcessedDist d;
  const size_t n = std::min(c.size(), static_cast<size_t>(top));
  int64_t kept = 0;
  for (size_t i = 0; i < n; ++i) kept += c[i].second;
  for (size_t i = 0; i < n; ++i)
    d.tokens.push_back(TokenProb{c[i].first, static_cast<double>(c[i].second) / kept});
  return d;
}

// The cursors of the longest continued match of `query` among `sources` (every source with that
// length), numbered from `first_source` for recency; `longest` receives the length.
std::vector<Cursor> longest_matches(const std::vector<const SuffixAutomaton*>& sources,
                                    int32_t first_source, std::span<const int32_t> query,
                                    int32_t& longest) {
  std::vector<Cursor> cursors;
  longest = 0;
  for (size_t i = 0; i < sources.size(); ++i) {
    const SuffixAutomaton::Match m = continued_match(*sources[i], query);
    if (m.length == 0 || m.length < longest) continue;
    if (m.length > longest) cursors.clear();
    longest = m.length;
    cursors.push_back(Cursor{sources[i], m.state, first_source + static_cast<int32_t>(i)});
  }
  return cursors;
}

// A draft for `r` from the cursors' continuations, with its expected number of accepted tokens
// under the empirical model (the sum of its nodes' path probabilities).
struct Candidate {
  DraftTree tree;
  double score = 0;
};

// How much a source's evidence must hold for a draft: the own text's any match; earlier
// requests' (another question's text) a longer match, or a more frequent first token.
struct Evidence {
  int32_t sure_match = 0;         // a shorter match makes the first token unsure
  double unsure_min_share = 0;    // an unsure first token with a smaller share is not offered
};

Candidate grow(const std::vector<Cursor>& cursors, int32_t longest, const DraftRequest& r,
               const SuffixDrafterOptions& opts_, const Evidence& need) {
  Candidate c;
  if (cursors.empty() || r.k <= 0) return c;
  const int32_t depth_cap = std::min<int32_t>(
      r.k, static_cast<int32_t>(std::ceil(opts_.depth_per_match * longest)));
  const Counts first = merged(cursors);
  const int64_t first_count = total(first);
  const double first_total = static_cast<double>(first_count);
  const int32_t width = std::max(1, r.width);
  for (size_t b = 0; b < first.size() && static_cast<int32_t>(b) < width; ++b) {
    double p = static_cast<double>(first[b].second) / first_total;
    if (p < opts_.min_prob) break;  // likeliest first: the rest are rarer still
    // An unsure first token (the text also went on otherwise, or the match is too short for
    // the source) is weak evidence for what follows it: the branch is cut, or not offered when
    // it is also rare (see the top).
    const bool split = first[b].second < first_count;
    if (split && p < need.unsure_min_share) break;  // the rest are rarer still
    const bool unsure = (split || longest < need.sure_match) && opts_.unsure_root_depth > 0;
    const int32_t branch_cap = unsure ? std::min(depth_cap, opts_.unsure_root_depth) : depth_cap;
    int32_t token = first[b].first;
    int32_t parent = c.tree.add(-1, token, one_hot(token));
    c.score += p;
    if (r.predict_top > 0) c.tree.predicted.push_back(top_dist(first, r.predict_top));
    std::vector<Cursor> at = step_all(cursors, token);
    for (int32_t depth = 1; depth < branch_cap; ++depth) {
      const Counts next = merged(at);
      if (next.empty()) break;
      p *= static_cast<double>(next.front().second) / static_cast<double>(total(next));
      if (p < opts_.min_prob) break;
      token = next.front().first;
      parent = c.tree.add(parent, token, one_hot(token));
      c.score += p;
      if (r.predict_top > 0) c.tree.predicted.push_back(top_dist(next, r.predict_top));
      at = step_all(at, token);
    }
  }
  return c;
}

}  // namespace

SuffixDrafter::SuffixDrafter(const SuffixDrafterOptions& opts)
    : opts_(opts) {
  cache_of(0);
  SSD_CHECK(opts.min_prob > 0 && opts.min_prob <= 1,
            "suffix drafter: --suffix-min-prob {} must be in (0, 1]", opts.min_prob);
  SSD_CHECK(opts.depth_per_match > 0, "suffix drafter: depth per matched token {} must be > 0",
            opts.depth_per_match);
  SSD_CHECK(opts.max_match >= 1, "suffix drafter: max match {} must be >= 1", opts.max_match);
  SSD_CHECK(opts.unsure_root_depth >= 0, "suffix drafter: unsure-root depth {} must be >= 0",
            opts.unsure_root_depth);
  if (opts.spelling_classes)
    for (int32_t c : *opts.spelling_classes)
      SSD_CHECK(c >= 0 && static_cast<size_t>(c) < opts.spelling_classes->size(),
                "suffix drafter: spelling class {} outside the vocabulary of {}", c,
                opts.spelling_classes->size());
  SSD_CHECK(opts.earlier_sure_match >= 0,
            "suffix drafter: earlier requests' sure match {} must be >= 0",
            opts.earlier_sure_match);
  SSD_CHECK(opts.earlier_unsure_min_share >= 0 && opts.earlier_unsure_min_share <= 1,
            "suffix drafter: earlier requests' unsure minimum share {} must be in [0, 1]",
            opts.earlier_unsure_min_share);
}

SuffixCache& SuffixDrafter::cache_of(uint64_t scope) {
  auto it = scopes_.find(scope);
  if (it == scopes_.end()) {
    if (scopes_.size() == kMaxScopes)  // drop the scope used least recently
      scopes_.erase(std::min_element(scopes_.begin(), scopes_.end(), [](const auto& a,
                                                                        const auto& b) {
        return a.second.last_used < b.second.last_used;
      }));
    it = scopes_.emplace(scope, Memory{SuffixCache(SuffixCacheOptions{.max_tokens =
                                                                          opts_.cache_tokens})})
             .first;
  }
  it->second.last_used = ++tick_;
  return it->second.cache;
}

void SuffixDrafter::set_memory_scope(uint64_t scope) {
  scope_ = scope;
  cache_of(scope);
}

void SuffixDrafter::start(int32_t seq, std::span<const int32_t> prompt) {
  Sequence& s = seqs_[seq];
  s = Sequence{};
  s.context.assign(prompt.begin(), prompt.end());
  s.own.append(prompt);
  s.scope = scope_;
  cache_of(scope_);
}

void SuffixDrafter::commit(int32_t seq, std::span<const int32_t> tokens) {
  auto it = seqs_.find(seq);
  SSD_CHECK(it != seqs_.end(), "suffix drafter: sequence {} was not started", seq);
  it->second.context.insert(it->second.context.end(), tokens.begin(), tokens.end());
  it->second.own.append(tokens);
}

void SuffixDrafter::finish(int32_t seq) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) return;
  cache_of(it->second.scope).add(it->second.context);
  seqs_.erase(it);
}

DraftTree SuffixDrafter::draft_one(const DraftRequest& r, const Sequence& s) const {
  // The query: the last max_match tokens of context + suffix.
  const size_t want = static_cast<size_t>(opts_.max_match);
  std::vector<int32_t> query;
  const size_t from_suffix = std::min(r.suffix.size(), want);
  const size_t from_ctx = std::min(s.context.size(), want - from_suffix);
  query.insert(query.end(), s.context.end() - static_cast<std::ptrdiff_t>(from_ctx),
               s.context.end());
  query.insert(query.end(), r.suffix.end() - static_cast<std::ptrdiff_t>(from_suffix),
               r.suffix.end());

  // One candidate from earlier requests (the cache's segments, oldest first), one from the
  // sequence's own text; the larger expected number of accepted tokens wins, the own text ties.
  std::vector<const SuffixAutomaton*> earlier;
  auto mem = scopes_.find(s.scope);  // gone only if kMaxScopes newer scopes came since
  if (mem != scopes_.end())
    for (const auto& seg : mem->second.cache.segments()) earlier.push_back(&seg);
  int32_t longest = 0;
  const std::vector<Cursor> from_cache = longest_matches(earlier, 0, query, longest);
  Candidate cached = grow(from_cache, longest, r, opts_,
                          Evidence{opts_.earlier_sure_match, opts_.earlier_unsure_min_share});
  const std::vector<Cursor> from_own =
      longest_matches({&s.own}, static_cast<int32_t>(earlier.size()), query, longest);
  Candidate own = grow(from_own, longest, r, opts_, Evidence{});
  if (cached.tree.empty() && own.tree.empty()) return spelling_fallback(r, s);
  return cached.score > own.score ? std::move(cached.tree) : std::move(own.tree);
}

DraftTree SuffixDrafter::spelling_fallback(const DraftRequest& r, const Sequence& s) const {
  DraftTree t;
  const std::vector<int32_t>* cls = opts_.spelling_classes.get();
  if (cls == nullptr || r.k <= 0) return t;
  // The text: context + suffix, read backwards from the token before the last.
  const int64_t n_ctx = static_cast<int64_t>(s.context.size());
  const int64_t n = n_ctx + static_cast<int64_t>(r.suffix.size());
  auto at = [&](int64_t i) {
    return i < n_ctx ? s.context[static_cast<size_t>(i)]
                     : r.suffix[static_cast<size_t>(i - n_ctx)];
  };
  if (n < 2) return t;
  auto class_of = [&](int32_t token) {  // -1 past the tokenizer's vocabulary (model padding)
    return token >= 0 && static_cast<size_t>(token) < cls->size()
               ? (*cls)[static_cast<size_t>(token)]
               : -1;
  };
  const int32_t want = class_of(at(n - 1));
  if (want < 0) return t;
  const int64_t lowest = std::max<int64_t>(0, n - 1 - kSpellingScan);
  for (int64_t i = n - 2; i >= lowest; --i)
    if (class_of(at(i)) == want) {
      const int32_t next = at(i + 1);
      t.add(-1, next, one_hot(next));
      if (r.predict_top > 0) t.predicted.push_back(one_hot(next));
      break;
    }
  return t;
}

std::vector<DraftTree> SuffixDrafter::draft(std::span<const DraftRequest> requests) {
  std::vector<DraftTree> trees;
  trees.reserve(requests.size());
  for (const DraftRequest& r : requests) {
    auto it = seqs_.find(r.seq);
    SSD_CHECK(it != seqs_.end(), "suffix drafter: sequence {} was not started", r.seq);
    trees.push_back(draft_one(r, it->second));
  }
  return trees;
}

}  // namespace ssd
