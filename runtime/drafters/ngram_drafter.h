// Prompt lookup / n-gram drafting: find earlier occurrences of the context's last n tokens
// (n from n_max down to n_min) and propose the tokens that followed them. It costs a scan of the
// context and no model, so it is also the fast backup speculator of SSD's miss fallback.
//
// Length: up to k, or to the end of the text after the match. With depth_per_match > 0
// (--ngram-depth-per-match; off by default) a continuation after an n-token match is at most
// ceil(depth_per_match x n) tokens: a short match is weak evidence for what follows, and every
// offered row costs verification. On the copy-heavy categories of perf/workloads, one per matched
// token (n <= 8) cut the mean acceptance length at k = 4 from 1.92 to 1.77 without a measurable
// gain in speed (perf/README.md), so it stays a study option.
//
// Branches: with width > 1, the distinct continuations of the most recent matches (longest n
// first) become sibling branches. Every draft token is deterministic, so its q is a one-hot.
// When nothing matches, the draft is empty and the round decodes one token as plain AR would.
// DraftRequest::predict_top: each node's DraftTree::predicted ranks the distinct tokens that
// followed matches of the text before that node (the lookup with width predict_top), weights
// 1 / (rank + 1) normalised (a branch follows one match, the ranking looks afresh at each node,
// so the node's own token need not rank first).
#pragma once

#include <map>

#include "runtime/spec/drafter.h"

namespace ssd {

struct NgramOptions {
  int32_t n_min = 1;
  int32_t n_max = 4;
  int64_t max_scan = 4096;  // look back at most this many positions
  // > 0: a continuation after an n-token match is at most ceil(depth_per_match x n) tokens long
  // (a short match is weak evidence for a long continuation); 0: up to k.
  double depth_per_match = 0;
};

class NgramDrafter final : public Drafter {
 public:
  explicit NgramDrafter(const NgramOptions& opts);
  std::string name() const override;
  bool drafts_cheaply() const override { return true; }
  void start(int32_t seq, std::span<const int32_t> prompt) override;
  void commit(int32_t seq, std::span<const int32_t> tokens) override;
  std::vector<DraftTree> draft(std::span<const DraftRequest> requests) override;
  void finish(int32_t seq) override;

  // The lookup itself, on any token sequence: up to `width` distinct continuations of length
  // <= k following earlier matches of the sequence's last n tokens (longest n, latest match first).
  static std::vector<std::vector<int32_t>> lookup(std::span<const int32_t> context, int32_t k,
                                                  int32_t width, const NgramOptions& opts);

 private:
  NgramOptions opts_;
  std::map<int32_t, std::vector<int32_t>> contexts_;
};

}  // namespace ssd
