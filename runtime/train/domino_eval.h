// Offline evaluation of a Domino drafter on self-distillation data (`ssd eval-domino`, and the
// trainer's held-out check): how often each block position's argmax is the target's own greedy
// token, and the acceptance length a greedy verifier would give.
//
// The data's responses ARE the target's greedy continuations and its features the target's
// hidden states, so for a block anchored at a (context [0, a), anchor t[a]) a greedy verifier
// accepts draft i exactly when argmax(final_i) == t[a+i] for every i' <= i. The GRU walk feeds
// its own argmax; while every earlier argmax matched, that IS the ground truth, so one
// teacher-forced pass gives the accepted prefix of each block (no second pass). A label outside
// the draft vocabulary cannot be drafted: it counts as a miss.
//
// With known = kn > 1 the blocks take SSD's pre-speculation shape: [t[a-kn+1..a], MASK...] after
// the context [0, a-kn+1) (the last kn tokens have no target features yet).
//
// The figures are per anchor, anchors on a fixed stride over each response; the mean acceptance
// length of a real run weights anchors by where rounds happen to start, so the two agree to a few
// percent, not exactly (the run's `ssd bench` is the measure; this is the quick, deterministic
// proxy that needs no decoding).
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/train/domino_train_model.h"
#include "runtime/train/domino_trainer.h"

namespace ssd::train {

struct EvalOptions {
  int32_t rows = 0;          // block rows [anchor, MASK x (rows-1)] (0 = the config's block)
  int32_t stride = 4;        // one anchor every `stride` response positions
  int64_t max_seqs = 0;      // evaluate the first N usable sequences (0 = all)
  int32_t max_anchors = 48;  // per sequence, spread evenly (bounds the pass's memory)
  int32_t known = 1;         // known tokens per block without features (> 1: SSD's shape)
};

struct EvalReport {
  int32_t rows = 0;                       // block rows evaluated (drafts per block = rows - 1)
  int64_t seqs = 0, blocks = 0;
  std::vector<int64_t> hits_final, hits_base, labelled;  // [rows]: index i = draft position i
  std::vector<int64_t> accepted;          // [rows]: blocks whose accepted prefix is exactly i
  double ce_final = 0, ce_base = 0;       // mean per block (position-weighted, as in training)
  // Mean acceptance length with the bonus token, drafts capped at k (k <= rows - 1).
  double mal(int32_t k) const;
  double acc_final(int32_t i) const;
  double acc_base(int32_t i) const;
};

// params: the flat layout of cfg (domino_params.h). cfg.block_size is replaced by opt.rows.
EvalReport evaluate_domino(const DominoConfig& cfg, const FrozenTarget& target,
                           const std::vector<float>& params, const TrainData& data,
                           const EvalOptions& opt);

}  // namespace ssd::train
