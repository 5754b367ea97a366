// Random sampled-mode verification cases (draft trees with their target rows) and their CSR
// packing as the device tree verifier reads it (kernels/common/verify_math.h's TreeLists,
// cuda::SampledTrees), for the twin test on the CPU (tests/unit/device_math) and the device test
// (tests/unit/cuda).
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "kernels/common/verify_math.h"
#include "runtime/sampling/sampler.h"
#include "runtime/spec/draft_tree.h"
#include "runtime/spec/verify.h"

namespace ssd::test {

// How each node's q relates to the target: drawn independently, equal to its parent's target row
// (always accepted), or a one-hot.
enum class TreeDraft { Independent, SameAsTarget, OneHot };

struct TreeCase {
  DraftTree tree;
  std::vector<ProcessedDist> p;  // [tree.size() + 1] row 0: the root's, row 1 + i: after node i
  VerifyRng rng;
};

// A tree of the given shape (parents[i] < i, -1: a child of the root): every target row and every
// q processed with cfg from N(0, 1.5) logits over `vocab`, node i's token drawn from its q.
TreeCase random_tree_case(const std::vector<int32_t>& parents, int32_t vocab,
                          const SamplerConfig& cfg, TreeDraft kind, std::mt19937& rng,
                          VerifyRng verify_rng);

// Cases of one node count n, packed one after the other.
struct PackedTrees {
  int32_t n = 0;
  std::vector<int32_t> p_ids, q_ids, tokens, first, next;
  std::vector<double> p_probs, q_probs;
  std::vector<int64_t> p_off = {0}, q_off = {0};
  int64_t longest_p = 0;
  // Case b's lists, addressed as the kernel addresses them.
  kernels::hd::TreeLists lists(size_t b) const;
};
PackedTrees pack_trees(std::span<const TreeCase> cases);

}  // namespace ssd::test
