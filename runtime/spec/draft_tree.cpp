#include "runtime/spec/draft_tree.h"

#include <algorithm>

#include "runtime/core/error.h"

namespace ssd {

ProcessedDist one_hot(int32_t token) {
  ProcessedDist d;
  d.tokens.push_back(TokenProb{token, 1.0});
  return d;
}

int32_t DraftTree::depth(int32_t node) const {
  int32_t d = 0;
  for (int32_t n = node; n >= 0; n = parents[n]) ++d;
  return d;
}

int32_t DraftTree::max_depth() const {
  int32_t d = 0;
  for (size_t i = 0; i < size(); ++i) d = std::max(d, depth(static_cast<int32_t>(i)));
  return d;
}

bool DraftTree::is_chain() const {
  for (size_t i = 0; i < parents.size(); ++i)
    if (parents[i] != static_cast<int32_t>(i) - 1) return false;
  return true;
}

DraftTree DraftTree::truncated(int32_t depth_limit) const {
  DraftTree t;
  std::vector<int32_t> index(size(), -1), depth_of(size(), 0);  // old node -> new node, depth
  for (size_t i = 0; i < size(); ++i) {
    const int32_t p = parents[i];
    depth_of[i] = p < 0 ? 1 : depth_of[static_cast<size_t>(p)] + 1;
    if (depth_of[i] > depth_limit) continue;
    index[i] = t.add(p < 0 ? -1 : index[static_cast<size_t>(p)], tokens[i], q[i]);
    if (!predicted.empty()) t.predicted.push_back(predicted[i]);
  }
  return t;
}

int32_t DraftTree::add(int32_t parent, int32_t token, ProcessedDist q_dist) {
  tokens.push_back(token);
  parents.push_back(parent);
  q.push_back(std::move(q_dist));
  return static_cast<int32_t>(tokens.size() - 1);
}

DraftTree DraftTree::chain(const std::vector<int32_t>& toks, const std::vector<ProcessedDist>& q) {
  DraftTree t;
  for (size_t i = 0; i < toks.size(); ++i)
    t.add(static_cast<int32_t>(i) - 1, toks[i], i < q.size() ? q[i] : one_hot(toks[i]));
  return t;
}

DraftTree DraftTree::chain(const std::vector<int32_t>& toks) {
  DraftTree t;
  for (size_t i = 0; i < toks.size(); ++i) t.add(static_cast<int32_t>(i) - 1, toks[i], one_hot(toks[i]));
  return t;
}

void DraftTree::validate(int32_t vocab) const {
  SSD_CHECK(parents.size() == tokens.size() && q.size() == tokens.size(),
            "draft tree: {} tokens, {} parents, {} distributions", tokens.size(), parents.size(),
            q.size());
  SSD_CHECK(predicted.empty() || predicted.size() == tokens.size(),
            "draft tree: {} tokens but {} predicted distributions", tokens.size(),
            predicted.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    SSD_CHECK(parents[i] >= -1 && parents[i] < static_cast<int32_t>(i),
              "draft tree: node {} has parent {} (must be -1 or an earlier node)", i, parents[i]);
    SSD_CHECK(tokens[i] >= 0 && tokens[i] < vocab, "draft tree: node {} token {} is outside the vocabulary", i,
              tokens[i]);
    SSD_CHECK(q[i].prob_of(tokens[i]) > 0,
              "draft tree: node {} token {} has probability 0 under its own q", i, tokens[i]);
  }
}

}  // namespace ssd
