// Verification: given a draft tree and the target's distributions at the root and at every node,
// decide which path is accepted and which token follows it. The emitted tokens are distributed
// exactly as the target alone would produce them, whatever the drafter proposed.
//
// Row convention for target logits [n_nodes + 1, vocab]: row 0 is the target's next-token
// distribution after the root (the last emitted token), row 1 + i the distribution after node i.
// Node i is judged against its parent's row (row 0 for children of the root).
//
//   greedy   (temperature 0): follow the child equal to the target's argmax, as deep as it goes;
//            then emit the argmax at the stop node (the correction, or the bonus token after a
//            leaf). Output equals AR greedy decoding token for token.
//   sampling (temperature > 0): p and q are processed distributions (the user's temperature /
//            top-k / top-p / min-p applied identically on both sides, see sampler.h). At a node,
//            its children are tried in order: child x is accepted with probability
//            min(1, p(x) / q(x)); on rejection p <- normalise(max(0, p - q)) and the next child
//            is tried with that residual; when no child is accepted the emitted token is drawn
//            from the current residual (SpecInfer-style recursive rejection sampling; for a chain
//            this is Leviathan/Chen speculative sampling). After an accepted leaf the bonus token
//            is drawn from p at the leaf.
// Uniforms are Philox draws addressed by (seed, stream, position of the decided token, lane), so
// a run is reproducible from its seed. Lane scheme (lanes defined in sampler.h), at the position
// pos = rng.position + d of the token decided below a node at depth d (the root has d = 0):
//   accept_lane(j)   the accept test of the node's j-th child (0 = kLaneAccept, 1, 2, ... =
//                    kLaneAcceptMore + j - 1): every sibling has its own uniform;
//   kLaneResidual    the draw from the residual after every child was rejected;
//   kLaneToken       the draw from p itself at a node without children (the bonus token, or the
//                    only token of an empty tree), which is the very draw plain sampling
//                    (Sampler::sample at step pos) makes: an empty tree reproduces AR sampling.
// The drafter must draw its tokens from uniforms independent of these (its lanes start at
// kLaneDrafter); hence a node may have at most kMaxVerifySiblings children when sampling.
//
// Numerics and checks (see residual.h): p and every tried child's q must sum to 1 within 1e-6
// (ssd::Error otherwise); p is taken as normalised, so q == p always accepts. A residual with no
// mass cannot arise in exact arithmetic (rejection needs r(x) < q(x), which leaves mass); when
// rounding makes it vanish, r == q to ~1e-12 and the residual is kept unchanged.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "runtime/spec/draft_tree.h"

namespace ssd {

struct VerifyResult {
  std::vector<int32_t> path;     // accepted node indices from the root down
  std::vector<int32_t> emitted;  // tokens of the accepted path, then the correction/bonus token
  bool all_accepted = false;     // the path ends at a leaf of the tree (the last token is a bonus);
                                 // false for an empty tree (its one token is plain sampling)
  int32_t accepted() const { return static_cast<int32_t>(path.size()); }
};

// Where the verifier's uniforms come from: draws for the token decided at output position
// `position` of request `stream`.
struct VerifyRng {
  uint64_t seed = 0;  // the Philox key (verify_sampling reads this, not SamplerConfig::seed)
  uint64_t stream = 0;
  uint32_t position = 0;  // output index of the first token this round decides
};

// target_logits: [tree.size() + 1, vocab]. Only the rows along the accepted path are read
// (argmax / process()). Throws ssd::Error on a malformed tree (sizes, parent order, a token
// outside the vocabulary); the q of a child is checked only when sampling tests it (its token
// must have q > 0 and q must sum to 1), so verification costs O(nodes + sum of the tested |q|)
// on top of the rows it reads. Greedy ignores q.
VerifyResult verify_greedy(const DraftTree& tree, const float* target_logits, int32_t vocab);

// verify_greedy with the rows' argmaxes computed elsewhere (a device): best[r] is
// argmax(row r) for r = 0..tree.size(), or -1 for a row of NaN only (ssd::argmax's error when
// the walk reaches it). The same result as verify_greedy on those rows.
VerifyResult verify_greedy_argmax(const DraftTree& tree, std::span<const int32_t> best,
                                  int32_t vocab);

// Temperature 0 is verify_greedy. Otherwise each visited row is process()ed with cfg, the
// unvisited rows (below rejected children) never are.
VerifyResult verify_sampling(const DraftTree& tree, const float* target_logits, int32_t vocab,
                             const SamplerConfig& cfg, const VerifyRng& rng);

// The same rule with the target distributions given directly (p[0] for the root, p[1 + i] for
// node i): the core every caller above reduces to, and what the statistical tests drive.
// p.size() must be tree.size() + 1; only the rows of visited nodes are read.
VerifyResult verify_with_dists(const DraftTree& tree, std::span<const ProcessedDist> p,
                               const VerifyRng& rng);

// For verifiers that walk the tree elsewhere (a device: runtime/backend/cuda/device_verifier.h), the
// pieces of the host walk they must agree with:
// Children of every node in index order, as singly linked lists: head[parent + 1] is the first
// child (-1: none; head[0] is the root's), next[i] the sibling after node i.
struct DraftChildren {
  std::vector<int32_t> head;  // [n_nodes + 1]
  std::vector<int32_t> next;  // [n_nodes]
  explicit DraftChildren(const DraftTree& tree);
  int32_t first(int32_t node) const { return head[node + 1]; }
};
// The tree's shape and token range (sizes, parent order, tokens in [0, vocab)); ssd::Error with
// the verifier's message otherwise.
void check_draft_structure(const DraftTree& tree, int32_t vocab);
// q(token) of node `node`, checking that its q sums to 1 (within Residual::kSumTolerance) and
// gives its token a positive probability; ssd::Error with the verifier's message otherwise.
double checked_draft_q(const DraftTree& tree, int32_t node);

}  // namespace ssd
