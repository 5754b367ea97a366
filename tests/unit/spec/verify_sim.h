// Test support for verification: small "models" given as exact next-token distributions, a
// simulated drafter that really samples every node of its tree from the q it records (with its
// own Philox key, independent of the verifier's uniforms), and a generation loop that runs
// draft/verify rounds until two tokens are emitted. Without the drafter really sampling from q,
// a distribution test of the verifier would prove nothing: exactness holds only for drafts
// drawn from q.
//
// The models are Markov: the next-token distribution depends on the last token only (-1 = the
// start), so the exact law of the first two emitted tokens is start(a) * after[a](b). They are
// small (V <= 10: Model::p_without precomputes every sibling q without replacement).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <numeric>
#include <span>
#include <vector>

#include "runtime/sampling/philox.h"
#include "runtime/sampling/sampler.h"
#include "runtime/spec/draft_tree.h"
#include "runtime/spec/verify.h"

namespace ssd::spec_test {

using Dist = std::vector<double>;  // [V] probabilities by token id

inline Dist normalised(Dist d) {
  const double s = std::accumulate(d.begin(), d.end(), 0.0);
  for (double& x : d) x /= s;
  return d;
}

// Keeps the k largest entries (ties: lower id first) and renormalises: a top-k drafter's q.
inline Dist top_k(const Dist& d, int k) {
  std::vector<int> order(d.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return d[a] > d[b]; });
  Dist out(d.size(), 0.0);
  for (int i = 0; i < k && i < static_cast<int>(d.size()); ++i) out[order[i]] = d[order[i]];
  return normalised(out);
}

// Keeps only the tokens in [lo, hi), renormalised.
inline Dist restricted(const Dist& d, int lo, int hi) {
  Dist out = d;
  double s = 0;
  for (int i = 0; i < static_cast<int>(out.size()); ++i) {
    if (i < lo || i >= hi) out[i] = 0;
    s += out[i];
  }
  for (double& x : out) x /= s;
  return out;
}

inline Dist one_hot_dist(int v, int token) {
  Dist d(v, 0.0);
  d[token] = 1;
  return d;
}

// The sparse list verification consumes: entries > 0, probability descending then id ascending
// (the order process() produces).
inline ProcessedDist processed(const Dist& d) {
  ProcessedDist p;
  for (int i = 0; i < static_cast<int>(d.size()); ++i)
    if (d[i] > 0) p.tokens.push_back(TokenProb{i, d[i]});
  std::stable_sort(p.tokens.begin(), p.tokens.end(),
                   [](const TokenProb& a, const TokenProb& b) { return a.prob > b.prob; });
  return p;
}

inline Dist dense(const ProcessedDist& p, int v) {
  Dist d(v, 0.0);
  for (const TokenProb& t : p.tokens) d[t.id] += t.prob;
  return d;
}

// A deterministic random distribution with every entry >= 0.2 / v (no tiny cells, so every
// chi-square cell has a large expected count).
inline Dist random_dist(int v, uint64_t seed) {
  Dist d(v);
  for (int i = 0; i < v; ++i) d[i] = 0.2 + 0.8 * philox_uniform(seed, 0, static_cast<uint32_t>(i));
  return normalised(d);
}

struct Model {
  Dist start;                          // [V] first token
  std::vector<Dist> after;             // [V][V] after[t] = next-token distribution after token t
  std::vector<ProcessedDist> p_after;  // the same, processed (filled by finish())
  ProcessedDist p_start;
  // [V + 1][2^V] row last + 1 without the tokens in the bit mask, renormalised (empty when
  // nothing is left): the q of siblings drawn without replacement, precomputed for speed.
  std::vector<std::vector<ProcessedDist>> p_without;

  int vocab() const { return static_cast<int>(start.size()); }
  const ProcessedDist& next(int32_t last) const { return last < 0 ? p_start : p_after[last]; }
  const Dist& next_dense(int32_t last) const { return last < 0 ? start : after[last]; }
  const ProcessedDist& next_without(int32_t last, uint32_t mask) const {
    return p_without[last + 1][mask];
  }
  Model& finish() {
    p_start = processed(start);
    p_after.clear();
    for (const Dist& d : after) p_after.push_back(processed(d));
    const int v = vocab();
    p_without.assign(v + 1, std::vector<ProcessedDist>(size_t{1} << v));
    for (int last = -1; last < v; ++last)
      for (uint32_t mask = 0; mask < (1u << v); ++mask) {
        Dist d = next_dense(last);
        double sum = 0;
        for (int i = 0; i < v; ++i) sum += (mask >> i & 1) ? (d[i] = 0) : d[i];
        if (sum > 0) p_without[last + 1][mask] = processed(normalised(d));
      }
    return *this;
  }
};

// Each row drawn by make(seed): start = make(seed), after[t] = make(seed + 1 + t).
template <class Make>
Model make_model(int v, uint64_t seed, Make&& make) {
  Model m;
  m.start = make(seed);
  for (int t = 0; t < v; ++t) m.after.push_back(make(seed + 1 + static_cast<uint64_t>(t)));
  m.finish();
  return m;
}

inline Model random_model(int v, uint64_t seed) {
  return make_model(v, seed, [v](uint64_t s) { return random_dist(v, s); });
}

enum class Siblings { kWithReplacement, kWithoutReplacement };

struct DraftShape {
  std::vector<int> widths;  // children per node at each depth: {1, 1, 1} = chain of 3
  Siblings siblings = Siblings::kWithReplacement;
};

inline constexpr uint64_t kDraftSeed = 0xD4AF7'5EEDull;   // the simulated drafter's Philox key
inline constexpr uint64_t kVerifySeed = 0x7E41F'5EEDull;  // the verifier's

// Appends a node to `tree`, reusing the storage of a q left over from an earlier tree (the
// generation loop below reuses one tree, to keep allocation out of the 100k-trial loops).
inline int32_t add_node(DraftTree& tree, size_t& n, int32_t parent, int32_t token,
                        const ProcessedDist& q) {
  tree.tokens.push_back(token);
  tree.parents.push_back(parent);
  if (n < tree.q.size())
    tree.q[n] = q;
  else
    tree.q.push_back(q);
  return static_cast<int32_t>(n++);
}

// Fills `tree` with a tree continuing `last`, every node's token drawn from the q it records.
// Siblings drawn without replacement get q renormalised without the earlier siblings' tokens; a
// parent gets fewer children when q's support runs out.
inline void draft_tree(const Model& draft, const DraftShape& shape, int32_t last, uint64_t stream,
                       uint32_t pos, DraftTree& tree) {
  tree.tokens.clear();
  tree.parents.clear();
  size_t n = 0;
  std::vector<std::pair<int32_t, int32_t>> frontier{{-1, last}}, next;  // (node, its token)
  uint32_t lane = 0;
  for (size_t level = 0; level < shape.widths.size(); ++level) {
    next.clear();
    for (const auto& [parent, token] : frontier) {
      uint32_t drawn = 0;  // tokens of the earlier siblings (without replacement)
      for (int j = 0; j < shape.widths[level]; ++j) {
        const ProcessedDist& qp = shape.siblings == Siblings::kWithReplacement
                                      ? draft.next(token)
                                      : draft.next_without(token, drawn);
        if (qp.tokens.empty()) break;
        const int32_t x = sample(qp, philox_uniform(kDraftSeed, stream, pos, lane++));
        next.emplace_back(add_node(tree, n, parent, x, qp), x);
        drawn |= 1u << x;
      }
    }
    std::swap(frontier, next);
  }
  tree.q.resize(n);
}

inline DraftTree draft_tree(const Model& draft, const DraftShape& shape, int32_t last,
                            uint64_t stream, uint32_t pos) {
  DraftTree tree;
  draft_tree(draft, shape, last, stream, pos, tree);
  return tree;
}

// Target rows for `tree` continuing `last`: [0] after the root, [1 + i] after node i.
inline void target_rows(const Model& target, const DraftTree& tree, int32_t last,
                        std::vector<ProcessedDist>& rows) {
  rows.resize(tree.size() + 1);
  rows[0] = target.next(last);
  for (size_t i = 0; i < tree.size(); ++i) rows[1 + i] = target.next(tree.tokens[i]);
}

inline std::vector<ProcessedDist> target_rows(const Model& target, const DraftTree& tree,
                                              int32_t last) {
  std::vector<ProcessedDist> rows;
  target_rows(target, tree, last, rows);
  return rows;
}

using VerifyFn =
    std::function<VerifyResult(const DraftTree&, std::span<const ProcessedDist>, const VerifyRng&)>;

inline VerifyResult real_verify(const DraftTree& t, std::span<const ProcessedDist> p,
                                const VerifyRng& r) {
  return verify_with_dists(t, p, r);
}

struct Tally {
  int64_t trials = 0;
  std::vector<int64_t> first;    // [V] first emitted token
  std::vector<int64_t> pair;     // [V * V] first two emitted tokens, a * V + b
  int64_t first_accepted = 0;    // trials whose first round accepted at least one node
  std::vector<int32_t> outputs;  // [trials * 2] the first two tokens of every trial
};

// `trials` generations (stream = trial index), each running rounds until two tokens are out.
inline Tally generate(const Model& target, const Model& draft, const DraftShape& shape,
                      const VerifyFn& verify, int trials, uint64_t seed = kVerifySeed) {
  const int v = target.vocab();
  Tally t;
  t.trials = trials;
  t.first.assign(v, 0);
  t.pair.assign(static_cast<size_t>(v) * v, 0);
  t.outputs.reserve(static_cast<size_t>(trials) * 2);
  std::vector<int32_t> out;
  DraftTree tree;
  std::vector<ProcessedDist> rows;
  for (int trial = 0; trial < trials; ++trial) {
    out.clear();
    int32_t last = -1;
    for (int round = 0; out.size() < 2; ++round) {
      const auto pos = static_cast<uint32_t>(out.size());
      draft_tree(draft, shape, last, static_cast<uint64_t>(trial), pos, tree);
      target_rows(target, tree, last, rows);
      const VerifyResult r = verify(tree, rows, VerifyRng{seed, static_cast<uint64_t>(trial), pos});
      if (round == 0 && r.accepted() > 0) ++t.first_accepted;
      out.insert(out.end(), r.emitted.begin(), r.emitted.end());
      last = out.back();
    }
    ++t.first[out[0]];
    ++t.pair[static_cast<size_t>(out[0]) * v + out[1]];
    t.outputs.push_back(out[0]);
    t.outputs.push_back(out[1]);
  }
  return t;
}

// The exact law of the first two tokens of the target alone.
inline Dist pair_law(const Model& target) {
  const int v = target.vocab();
  Dist law(static_cast<size_t>(v) * v);
  for (int a = 0; a < v; ++a)
    for (int b = 0; b < v; ++b)
      law[static_cast<size_t>(a) * v + b] = target.start[a] * target.after[a][b];
  return law;
}

}  // namespace ssd::spec_test
