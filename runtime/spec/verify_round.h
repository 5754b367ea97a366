// One verification round for a batch of sequences: the unit of work of the target side of SD and
// SSD. For every sequence, its root (the last emitted token, not yet in the target's cache) and
// its draft tree go into ONE target forward: sequence after sequence, root first, then the tree's
// nodes in index order (row = base + 1 + node), with a tree mask per sequence (each node sees the
// root, its ancestors and itself) and nothing across sequences (the mask is block-diagonal). Then
// each sequence is verified exactly as single-sequence SD does (verify.h: greedy, or sampling with
// the uniforms of (seed, stream, step)), and its KV is compacted to root + accepted path.
//
// A sequence with an empty tree is an AR step in the same forward: its one row decides one token
// (greedy argmax, or the very draw plain sampling makes at that step).
//
// What comes back per sequence: the accepted nodes and the emitted tokens (accepted + the
// correction or bonus), the target's logits rows of root + tree (rows as in verify.h, for the
// drafter's observe()) and, when feature layers are asked for, the hidden states of root +
// accepted path at those layers (the features a drafter conditioning on the target receives).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "runtime/model/target_model.h"
#include "runtime/sampling/sampler.h"
#include "runtime/spec/draft_tree.h"
#include "runtime/spec/verify.h"

namespace ssd {

struct VerifyInput {
  SeqId kv_seq = -1;                // the sequence in the target's cache
  int32_t root = 0;                 // last emitted token, not in the cache yet
  int32_t root_pos = 0;             // its position == the sequence's cached length
  const DraftTree* tree = nullptr;  // null or empty: decode one token
  SamplerConfig sampler;
  uint64_t stream = 0;              // Philox stream of the request
  uint32_t step = 0;                // output index of the first token this round decides
};

struct VerifyOutput {
  VerifyResult result;          // path (accepted nodes) and emitted tokens
  int32_t first_row = 0;        // the sequence's root row in the round's forward
  int32_t rows = 0;             // 1 + tree size
  std::vector<float> features;  // [1 + path, layers x dim] at the round's feature layers
};

struct VerifyRoundResult {
  std::vector<VerifyOutput> seqs;  // in input order
  ForwardResult forward;           // logits [rows, vocab]: every row of the batch, in order
  int64_t rows = 0;                // batch rows (sum of 1 + tree size)
  double forward_s = 0;            // wall time of the target forward
  double verify_s = 0;             // wall time of the verifier's decisions
  double kv_s = 0;                 // wall time of the KV compactions

  // Sequence i's target logits on the host, [seqs[i].rows, vocab]: row 0 after the root, 1 + j
  // after node j. Null when the round left them on the device (verify_round's host_logits).
  const float* logits(size_t i) const {
    return forward.logits.empty() ? nullptr : forward.logits_row(seqs[i].first_row);
  }
};

// The forward of a round: roots and trees as described above; logits for every row, hidden
// states at `feature_layers`. The trees must be valid (DraftTree::validate).
Batch verify_batch(std::span<const VerifyInput> seqs, const std::vector<int32_t>& feature_layers);

// Runs the round: one forward, verification (by the target's TokenPicker), compaction. Throws
// ssd::Error before the forward when an input is malformed (a root position that is not the
// sequence's length, a bad tree); a forward that fails (e.g. the cache is full) leaves every
// sequence as it was. host_logits: the logits rows come back to the host (forward.logits) even
// when the picker reads them on the device; a caller that never reads them (no drafter
// observes them) passes false and saves the download.
VerifyRoundResult verify_round(TargetModel& target, std::span<const VerifyInput> seqs,
                               const std::vector<int32_t>& feature_layers = {},
                               bool host_logits = true);

}  // namespace ssd
