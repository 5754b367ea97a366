// What the drafter side of SSD hands out and takes in each round, rank-independent (the actors
// serialise these; nothing here knows about MPI).
//
//   Speculation   K tokens for one sequence, with the q each was drawn from (verification needs
//                 it when sampling) and, for the drafter's own outcome prediction, the ranking of
//                 alternatives at each of the K + 1 positions and the fan-out planned for them.
//                 The target needs tokens and q only.
//   RoundOutcome  the verifier's decision on one speculation: accepted count k and the emitted
//                 tokens (the k accepted ones, then the bonus/correction token).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "runtime/sampling/sampler.h"
#include "runtime/spec/draft_tree.h"

namespace ssd {

// Where a speculation came from.
enum class SpecSource : uint8_t {
  kInitial,  // round 0: drafted synchronously after the prompt
  kCache,    // a cache hit: pre-speculated while the previous round was verified
  kPrimary,  // a miss answered by the primary drafter, drafting now
  kBackup,   // a miss answered by the backup speculator (n-gram)
  kDecodeStep,  // none: the leader asked for length 0, a plain decode step; nothing is drafted
                // for it (but a lookup drafter ranks its likely tokens, ssd_drafter_core.h) and
                // it never travels to the target
};
const char* spec_source_name(SpecSource s);

struct Speculation {
  int32_t seq = 0;
  uint64_t id = 0;                       // per sequence: 0 for round 0, +1 per round
  std::vector<int32_t> tokens;           // [K'] the draft the target verifies (K' <= K)
  std::vector<ProcessedDist> q;          // [K'] the distribution each token was drawn from
  std::vector<ProcessedDist> predicted;  // [<= K' + 1] drafter's ranking at positions 0..K'
  std::vector<int32_t> fan_out;          // [K' + 1] F_k the outcome predictor uses
  SpecSource source = SpecSource::kInitial;
  // The length the target leader asked for (0..K; -1: K, the fixed --k): the drafter's guess of
  // the next length too, so the branches pre-speculated after this speculation draft
  // min(K, asked + 1) tokens rather than K (ssd_drafter_core.h, "Pre-speculation depth").
  int32_t asked = -1;

  bool hit() const { return source == SpecSource::kCache; }
  bool decode_step() const { return source == SpecSource::kDecodeStep; }
  // Branches can be pre-speculated after it: a drafted speculation, or a ranked decode step.
  bool plannable() const { return !decode_step() || !predicted.empty(); }
  // The chain the target verifies: tokens with their q (parents i - 1).
  DraftTree tree() const;
};

struct RoundOutcome {
  int32_t seq = 0;
  int32_t accepted = 0;          // k: speculation tokens accepted
  std::vector<int32_t> emitted;  // [k + 1] the accepted tokens, then the bonus/correction
  // The length of the sequence's next speculation, chosen by the target leader (--k auto): the
  // answer is cut to it (0: an empty speculation, a plain decode step). -1: the full K.
  int32_t next_k = -1;
  // Optional, for online-learning drafters (Drafter::observe): the target's verification rows
  // [K' + 1, vocab] (verify.h's row convention). Null when the drafter rank does not have them.
  const float* target_logits = nullptr;
  int32_t vocab = 0;
  // Optional, for drafters conditioning on the target (Drafter::target_feature_layers): the
  // target's hidden states of context positions [features_from, features_from + feature_rows)
  // (the root and the accepted tokens), [feature_rows, feature_dim]. Null when none.
  const float* features = nullptr;
  int64_t features_from = 0;
  int64_t feature_rows = 0;
  int64_t feature_dim = 0;
  // The next speculation, when the target leader drafted it itself (--miss-at leader: its copy of
  // the lookup drafter this core answers misses with, SsdDrafterCore::miss_lookup): tokens, q and
  // source (kPrimary or kBackup); on_outcome adopts it instead of looking the outcome up.
  std::optional<Speculation> given;
};

}  // namespace ssd
