// Verification of a draft tree (the rule and the lane scheme are in verify.h). One walk from the
// root serves all three entry points: at each node, its children are tried in order against the
// residual of the node's target row, and the walk either descends into the accepted child or
// ends with one drawn token. The target rows are reached through a callback, so that
// verify_sampling runs process() only on the rows the walk visits (a rejected subtree's rows
// are never touched), and verify_with_dists just indexes its span.
//
// Why the proof carries over to trees: at a node with residual r, drawing child j's token from
// its q_j, accepting with min(1, r / q_j) and otherwise continuing with normalise(max(0, r - q_j))
// emits a token distributed as r, whatever q_j is as long as the token really was drawn from it
// given everything before (Leviathan et al.'s one-step lemma, applied recursively). So siblings
// drawn with replacement (same q) and without (q renormalised without earlier siblings' tokens)
// are both exact, and each node's first emitted token is distributed as its target row.
#include "runtime/spec/verify.h"

#include <cmath>
#include <limits>

#include "runtime/core/error.h"
#include "runtime/spec/residual.h"

namespace ssd {

DraftChildren::DraftChildren(const DraftTree& tree)
    : head(tree.size() + 1, -1), next(tree.size(), -1) {
  for (int32_t i = static_cast<int32_t>(tree.size()) - 1; i >= 0; --i) {
    next[i] = head[tree.parents[i] + 1];
    head[tree.parents[i] + 1] = i;
  }
}

// The tree's shape and token range: DraftTree::validate without its q checks, which cost
// O(|q|) for every node; verification checks q only for the children it actually tests.
void check_draft_structure(const DraftTree& tree, int32_t vocab) {
  SSD_CHECK(tree.parents.size() == tree.tokens.size() && tree.q.size() == tree.tokens.size(),
            "verify: draft tree has {} tokens, {} parents, {} distributions", tree.tokens.size(),
            tree.parents.size(), tree.q.size());
  for (size_t i = 0; i < tree.size(); ++i) {
    SSD_CHECK(tree.parents[i] >= -1 && tree.parents[i] < static_cast<int32_t>(i),
              "verify: draft node {} has parent {} (must be -1 or an earlier node)", i,
              tree.parents[i]);
    SSD_CHECK(tree.tokens[i] >= 0 && tree.tokens[i] < vocab,
              "verify: draft node {} token {} is outside the vocabulary ({})", i, tree.tokens[i],
              vocab);
  }
}

// q(token) for a child about to be tested, checking that q is a normalised distribution: an
// unnormalised q would silently bias the output (and could empty a residual, see residual.h).
double checked_draft_q(const DraftTree& tree, int32_t node) {
  const ProcessedDist& q = tree.q[node];
  const int32_t token = tree.tokens[node];
  double sum = 0, q_token = 0;
  for (const TokenProb& t : q.tokens) {
    sum += t.prob;
    if (t.id == token && q_token == 0) q_token = t.prob;
  }
  SSD_CHECK(std::abs(sum - 1) <= Residual::kSumTolerance,
            "verify: q of draft node {} sums to {}, not 1 (tolerance {})", node, sum,
            Residual::kSumTolerance);
  SSD_CHECK(q_token > 0, "verify: draft node {} token {} has probability 0 under its own q", node,
            token);
  return q_token;
}

namespace {

// The walk. row(r) returns the target distribution of row r (0 = root, 1 + i = after node i);
// the reference it returns need only stay valid until the next call.
template <class RowFn>
VerifyResult walk(const DraftTree& tree, RowFn&& row, const VerifyRng& rng) {
  thread_local Residual residual;  // reused: its token index is sized to the vocabulary once
  const DraftChildren children(tree);
  VerifyResult out;
  int32_t node = -1;  // the root
  for (uint32_t depth = 0;; ++depth) {
    const uint32_t pos = rng.position + depth;
    const ProcessedDist& p = row(node + 1);
    int32_t child = children.first(node);
    if (child < 0) {  // a leaf (or an empty tree): the token after it is drawn from p itself
      out.emitted.push_back(sample(p, philox_uniform(rng.seed, rng.stream, pos, kLaneToken)));
      out.all_accepted = node >= 0;
      return out;
    }
    residual.reset(p);
    int32_t accepted = -1;
    for (uint32_t j = 0; child >= 0; child = children.next[child], ++j) {
      // Each sibling has its own Philox lane, and there are kMaxVerifySiblings of them.
      SSD_CHECK(j < kMaxVerifySiblings,
                "verify: draft node {} (-1 = the root) has more than {} children", node,
                kMaxVerifySiblings);
      const double q_token = checked_draft_q(tree, child);
      const double u = philox_uniform(rng.seed, rng.stream, pos, accept_lane(j));
      if (residual.accepts(tree.tokens[child], q_token, u)) {
        accepted = child;
        break;
      }
      residual.reject(tree.q[child]);
    }
    if (accepted < 0) {  // every child rejected: the correction comes from what is left of p
      out.emitted.push_back(
          residual.sample(philox_uniform(rng.seed, rng.stream, pos, kLaneResidual)));
      return out;
    }
    out.path.push_back(accepted);
    out.emitted.push_back(tree.tokens[accepted]);
    node = accepted;
  }
}

// The greedy walk: best(r) is the target's argmax of row r (0 = root, 1 + i = after node i),
// asked only for the rows along the accepted path.
template <class BestFn>
VerifyResult greedy_walk(const DraftTree& tree, BestFn&& best_of) {
  const DraftChildren children(tree);
  VerifyResult out;
  int32_t node = -1;
  for (;;) {
    const int32_t best = best_of(node + 1);
    int32_t child = children.first(node);
    const bool leaf = child < 0;
    while (child >= 0 && tree.tokens[child] != best) child = children.next[child];
    if (child < 0) {  // no child matches: best is the correction, or the bonus after a leaf
      out.emitted.push_back(best);
      out.all_accepted = leaf && node >= 0;
      return out;
    }
    out.path.push_back(child);
    out.emitted.push_back(best);
    node = child;
  }
}

}  // namespace

VerifyResult verify_greedy(const DraftTree& tree, const float* target_logits, int32_t vocab) {
  SSD_CHECK(vocab > 0, "verify: vocabulary size must be positive (got {})", vocab);
  check_draft_structure(tree, vocab);
  return greedy_walk(tree, [&](int32_t r) {
    return argmax(target_logits + static_cast<size_t>(r) * vocab, vocab);
  });
}

VerifyResult verify_greedy_argmax(const DraftTree& tree, std::span<const int32_t> best,
                                  int32_t vocab) {
  SSD_CHECK(vocab > 0, "verify: vocabulary size must be positive (got {})", vocab);
  SSD_CHECK(best.size() == tree.size() + 1,
            "verify: {} row argmaxes for a tree of {} nodes (need one per node + 1)", best.size(),
            tree.size());
  check_draft_structure(tree, vocab);
  return greedy_walk(tree, [&](int32_t r) {
    SSD_CHECK(best[r] >= 0, "argmax: all {} logits are NaN", vocab);  // ssd::argmax's error
    return best[r];
  });
}

VerifyResult verify_sampling(const DraftTree& tree, const float* target_logits, int32_t vocab,
                             const SamplerConfig& cfg, const VerifyRng& rng) {
  validate(cfg);
  if (is_greedy(cfg)) return verify_greedy(tree, target_logits, vocab);
  SSD_CHECK(vocab > 0, "verify: vocabulary size must be positive (got {})", vocab);
  check_draft_structure(tree, vocab);
  thread_local ProcessedDist dist;  // one row at a time: the walk copies what it keeps
  auto row = [&](int32_t r) -> const ProcessedDist& {
    process_into(target_logits + static_cast<size_t>(r) * vocab, vocab, cfg, dist);
    return dist;
  };
  return walk(tree, row, rng);
}

VerifyResult verify_with_dists(const DraftTree& tree, std::span<const ProcessedDist> p,
                               const VerifyRng& rng) {
  SSD_CHECK(p.size() == tree.size() + 1,
            "verify: {} target distributions for a tree of {} nodes (need one per node + 1)",
            p.size(), tree.size());
  check_draft_structure(tree, std::numeric_limits<int32_t>::max());
  auto row = [&](int32_t r) -> const ProcessedDist& { return p[r]; };
  return walk(tree, row, rng);
}

}  // namespace ssd
