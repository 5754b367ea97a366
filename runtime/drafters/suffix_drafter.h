// Suffix drafting, after "SuffixDecoding: A Model-Free Approach to Speeding Up Large-Language
// Model Inference" (Oliaro et al., 2024): a model-free drafter that proposes what followed the
// current text's longest match in text it has already seen, with how often it followed.
//
// Sources, each a suffix automaton (suffix_automaton.h):
//   - the sequence's own text: its prompt and its output as it grows (one automaton per
//     sequence, extended on every commit);
//   - earlier requests' prompts and outputs in this process (suffix_cache.h), bounded by a token
//     budget with the oldest requests evicted first; one such memory per memory scope
//     (Drafter::set_memory_scope), at most kMaxScopes of them.
// A draft matches the last max_match tokens of context + the request's hypothetical suffix
// against every source, backing off along suffix links to the longest suffix that has a
// continuation. Two candidate drafts are grown, one from the cache's segments and one from the
// sequence's own text; within each, the sources with the longest such match are merged (the
// continuation frequencies at each step are the sums of their counts, and their ratio to the
// total is the empirical continuation probability), and equally frequent continuations are
// ranked by recency (the one seen last first). The candidate with the larger score (the sum of
// its nodes' path probabilities: the expected accepted tokens under the empirical model) is
// proposed, the own text on a tie. (Merging the two instead let a longer match in an earlier
// request's text override the passage being copied: measured on perf/workloads, rag MAL 1.81
// merged against 1.87 chosen, at the same depth cap. Weighting each source's score by what its
// drafts had earned did not measurably help: docs/speculation-length.md, "Tried and not kept".)
//
// Shape and length: up to `width` first-level branches (the likeliest distinct continuations),
// each extended greedily by its likeliest next token. A branch stops when the product of the
// empirical probabilities along it (its chance of being what the text did) falls below
// min_prob, or at depth min(k, ceil(depth_per_match x match length)): a short match is weaker
// evidence for a long continuation (4 per token measured best of 2, 4 and unbounded on the
// copy-heavy categories of perf/workloads: MAL 1.87 -> 1.97 on rag at k = 4, no gain past it; 1
// per token lowered the acceptance length without a measurable gain in speed, perf/README.md).
// A branch whose first token is not the only continuation the text had (an unsure root) stops
// after unsure_root_depth tokens (1): on perf/workloads' rag prompts such drafts had their first
// token right 0.18 of the time against 0.64 after a sure one, yet were offered 4-5 tokens, and
// the length policy, which tells drafts apart by their offered length, priced them as good ones
// (docs/drafters-lookup.md). Earlier requests' text is another question's, so it needs more
// evidence: a first token matched there by one token only counts as unsure, and an unsure one
// that is not the continuation of at least half the matches there is not offered (such drafts
// were rarely right on rag, docs/drafters-lookup.md). Nothing to offer from either source: with
// spelling classes (spelling_classes.h), the token that followed the own text's latest other
// spelling of the last token (" the" for "The") is offered alone; else an empty draft (the
// round decodes one token).
// Every token is deterministic, so q is a one-hot and verification stays exact. With
// DraftRequest::predict_top, each node's predicted list holds the empirical distribution at its
// position (the likeliest predict_top tokens, renormalised).
#pragma once

#include <map>
#include <memory>

#include "runtime/drafters/suffix_cache.h"
#include "runtime/spec/drafter.h"

namespace ssd {

struct SuffixDrafterOptions {
  int64_t cache_tokens = int64_t{1} << 20;  // earlier requests remembered; 0: own text only
  double min_prob = 0.1;                    // stop a branch below this path probability
  double depth_per_match = 4.0;             // depth cap per matched token
  int32_t max_match = 32;                   // the longest suffix matched (query tokens)
  // A branch whose first token is not the only continuation the text had is cut to this many
  // tokens (0: not cut).
  int32_t unsure_root_depth = 1;
  // Earlier requests' text (another question's) needs more evidence than the own text's: a
  // first token matched by fewer than earlier_sure_match tokens counts as unsure (cut as above),
  // and an unsure one that took less than earlier_unsure_min_share of the continuations there is
  // not offered at all (0: no such rule).
  int32_t earlier_sure_match = 2;
  double earlier_unsure_min_share = 0.5;
  // [vocab] spelling classes (spelling_classes.h), or null: when neither source has a draft, the
  // token that followed the own text's latest other spelling of the last token is offered alone.
  std::shared_ptr<const std::vector<int32_t>> spelling_classes;
};

class SuffixDrafter final : public Drafter {
 public:
  explicit SuffixDrafter(const SuffixDrafterOptions& opts);
  std::string name() const override { return "suffix"; }
  bool drafts_cheaply() const override { return true; }
  void start(int32_t seq, std::span<const int32_t> prompt) override;
  void commit(int32_t seq, std::span<const int32_t> tokens) override;
  std::vector<DraftTree> draft(std::span<const DraftRequest> requests) override;
  void finish(int32_t seq) override;

  void set_memory_scope(uint64_t scope) override;

  // The current scope's memory of earlier requests.
  const SuffixCache& cache() const { return scopes_.at(scope_).cache; }
  static constexpr size_t kMaxScopes = 8;  // past it, the scope used least recently is dropped
  static constexpr int64_t kSpellingScan = 4096;  // positions the spelling fallback looks back

 private:
  struct Sequence {
    std::vector<int32_t> context;  // prompt + committed tokens
    SuffixAutomaton own;
    uint64_t scope = 0;            // whose memory it reads and, finished, joins
  };
  struct Memory {        // one scope's memory of earlier requests
    SuffixCache cache;
    int64_t last_used = 0;  // tick of the scope's last start
  };
  DraftTree draft_one(const DraftRequest& r, const Sequence& s) const;
  DraftTree spelling_fallback(const DraftRequest& r, const Sequence& s) const;
  SuffixCache& cache_of(uint64_t scope);

  SuffixDrafterOptions opts_;
  std::map<uint64_t, Memory> scopes_;  // scope -> its memory
  int64_t tick_ = 0;
  uint64_t scope_ = 0;
  std::map<int32_t, Sequence> seqs_;
};

}  // namespace ssd
