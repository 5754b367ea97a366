// What a drafter proposes for one sequence: a tree of candidate tokens continuing the sequence's
// last emitted token (the root). A linear draft of K tokens is the chain parent[i] = i - 1.
//
// Every node carries q, the exact distribution its token was drawn from, so that verification can
// keep the target's output distribution exact (accept with min(1, p/q), else continue from the
// residual). q is a ProcessedDist: a sparse, exactly known distribution (a top-k-truncated draft
// distribution, a one-hot for a deterministic drafter such as n-gram or greedy, or a dense list
// of the whole vocabulary). Siblings drawn without replacement carry the renormalised q they were
// actually drawn from (the earlier siblings' tokens removed).
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/sampling/sampler.h"

namespace ssd {

struct DraftTree {
  std::vector<int32_t> tokens;   // [n_nodes]
  std::vector<int32_t> parents;  // [n_nodes]; -1 = child of the root; parents[i] < i
  std::vector<ProcessedDist> q;  // [n_nodes] distribution node i's token was drawn from
  // [n_nodes] or empty: when the request asked (DraftRequest::predict_top), the drafter's
  // likeliest tokens at node i's position, likeliest first (what node i's token was chosen among,
  // before any Saguaro reshape). Verification never reads it.
  std::vector<ProcessedDist> predicted;

  size_t size() const { return tokens.size(); }
  bool empty() const { return tokens.empty(); }
  int32_t depth(int32_t node) const;  // 1 for a child of the root
  int32_t max_depth() const;          // the deepest node's depth (a chain's length; 0 if empty)
  bool is_chain() const;              // parents[i] == i - 1 for all i

  // Appends a node; returns its index.
  int32_t add(int32_t parent, int32_t token, ProcessedDist q_dist);
  // A chain of tokens, each with a one-hot q (deterministic drafters).
  static DraftTree chain(const std::vector<int32_t>& tokens);
  // A chain of tokens drawn from q[i] (a one-hot where q has no entry for the node).
  static DraftTree chain(const std::vector<int32_t>& tokens, const std::vector<ProcessedDist>& q);
  // Throws ssd::Error naming the node when parents are out of order or tokens out of range.
  void validate(int32_t vocab) const;
  // The nodes at depth <= depth_limit, in their order (q and predicted with them).
  DraftTree truncated(int32_t depth_limit) const;
};

// One-hot distribution at `token` (the q of a deterministic draft).
ProcessedDist one_hot(int32_t token);

}  // namespace ssd
