// Random sampled-mode tree cases and their packing (see sampled_trees.h).
#include "tests/support/sampled_trees.h"

#include <algorithm>

#include "runtime/core/error.h"
#include "runtime/sampling/philox.h"

namespace ssd::test {

TreeCase random_tree_case(const std::vector<int32_t>& parents, int32_t vocab,
                          const SamplerConfig& cfg, TreeDraft kind, std::mt19937& rng,
                          VerifyRng verify_rng) {
  std::normal_distribution<float> g(0.0f, 1.5f);
  auto dist = [&] {
    std::vector<float> l(static_cast<size_t>(vocab));
    for (float& x : l) x = g(rng);
    return process(l.data(), vocab, cfg);
  };
  TreeCase c;
  c.rng = verify_rng;
  const auto n = static_cast<int32_t>(parents.size());
  for (int32_t r = 0; r <= n; ++r) c.p.push_back(dist());
  for (int32_t i = 0; i < n; ++i) {
    ProcessedDist q = kind == TreeDraft::SameAsTarget ? c.p[parents[i] + 1] : dist();
    if (kind == TreeDraft::OneHot) q.tokens = {TokenProb{q.tokens.front().id, 1.0}};
    c.tree.tokens.push_back(
        sample(q, philox_uniform(99, verify_rng.stream, static_cast<uint32_t>(i), kLaneDrafter)));
    c.tree.parents.push_back(parents[i]);
    c.tree.q.push_back(std::move(q));
  }
  return c;
}

kernels::hd::TreeLists PackedTrees::lists(size_t b) const {
  kernels::hd::TreeLists l;
  l.p_ids = p_ids.data();
  l.p_probs = p_probs.data();
  l.p_off = p_off.data() + b * (n + 1);
  l.q_ids = q_ids.data();
  l.q_probs = q_probs.data();
  l.q_off = q_off.data() + b * n;
  l.tokens = tokens.data() + b * n;
  l.first = first.data() + b * (n + 1);
  l.next = next.data() + b * n;
  l.n = n;
  return l;
}

PackedTrees pack_trees(std::span<const TreeCase> cases) {
  PackedTrees pk;
  SSD_ASSERT(!cases.empty());
  pk.n = static_cast<int32_t>(cases.front().tree.size());
  auto add = [](const ProcessedDist& d, std::vector<int32_t>& ids, std::vector<double>& probs,
                std::vector<int64_t>& off) {
    for (const TokenProb& t : d.tokens) {
      ids.push_back(t.id);
      probs.push_back(t.prob);
    }
    off.push_back(static_cast<int64_t>(ids.size()));
  };
  for (const TreeCase& c : cases) {
    SSD_ASSERT(static_cast<int32_t>(c.tree.size()) == pk.n);
    for (const ProcessedDist& d : c.p) {
      add(d, pk.p_ids, pk.p_probs, pk.p_off);
      pk.longest_p = std::max(pk.longest_p, static_cast<int64_t>(d.size()));
    }
    for (const ProcessedDist& d : c.tree.q) add(d, pk.q_ids, pk.q_probs, pk.q_off);
    pk.tokens.insert(pk.tokens.end(), c.tree.tokens.begin(), c.tree.tokens.end());
    const DraftChildren ch(c.tree);
    pk.first.insert(pk.first.end(), ch.head.begin(), ch.head.end());
    pk.next.insert(pk.next.end(), ch.next.begin(), ch.next.end());
  }
  return pk;
}

}  // namespace ssd::test
