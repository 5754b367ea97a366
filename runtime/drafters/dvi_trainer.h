// Online training of the early-exit draft head (DVI, "Draft, Verify, and Improve: Toward Training-
// Aware Speculative Decoding"): a bounded rollout buffer of logged tuples and the KL->RL schedule
// that turns the verifier's accept/reject decisions into updates of the LoRA parameters A and B
// (the backbone and the LM head stay frozen).
//
// Tuple (one per drafted position, up to and including the first reject):
//   z            normed h_L at the position (the head's input)           [dim]
//   base_logits  W z, the frozen part of the draft logits: with the head's
//                parameters it gives the draft logits exactly, at any time,
//                so the full draft logits need not be stored as well      [vocab]
//   token        the drafted token a; prev_token the token before it (logged as DVI does; this
//                head reads z alone, so it is kept for analysis, not used by the loss)
//   reward       1 accepted, 0 the first reject
//   logq_behavior log q(a) under the head that drafted it (diagnostic: how far the head has
//                moved since; the update itself is on-policy for the current head)
//   p            the target's distribution at the position (softmax at temperature 1 of the
//                verifier's logits row of the node's parent), kept on its top-k support and
//                renormalised (target_top_k = 0 keeps the whole vocabulary)
//
// Schedule: every `train_every` (M) new tuples, one optimizer step on a minibatch of `batch`
// tuples: the M newest (so every tuple is trained on at once, on-policy for the PG term) plus a
// uniform sample without replacement of the rest of the buffer (replay, which decorrelates the
// consecutive positions of one sequence); the sample is Philox-seeded, so runs repeat.
// The first `kl_updates` (N_kl) steps use pure online distillation (weights kl = kl_weight, ce =
// pg = 0); later steps use kl = rl_kl_weight, ce = ce_weight, pg = pg_weight, with the baseline b
// the running mean reward (an exact mean over the first 1 / baseline_rate tuples, then an
// exponential average with that rate). Loss and gradients: dvi_loss.h.
//
// Cost: an update is O(batch * vocab * rank) plus a softmax over the vocabulary per tuple; the
// buffer holds capacity * (vocab + dim + 2 * top_k) floats. Both are measured in DviStats.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "runtime/drafters/dvi_loss.h"
#include "runtime/drafters/lora_head.h"

namespace ssd {

enum class DviOptimizer { Adam, Sgd };

struct DviOptions {
  int32_t capacity = 128;      // tuples kept in the rollout buffer (oldest dropped first)
  int32_t train_every = 8;     // M: one update per M new tuples
  int32_t batch = 32;          // tuples per update (the M newest + replay from the buffer)
  int32_t kl_updates = 30;     // N_kl: pure-distillation updates before the RL phase
  int32_t target_top_k = 64;   // support of the target distribution kept; 0 = full vocabulary
  double kl_weight = 1.0;      // KL phase
  double rl_kl_weight = 0.5;   // RL phase: distillation kept as a regulariser
  double ce_weight = 1.0;      // RL phase: reward-masked cross-entropy
  double pg_weight = 0.5;      // RL phase: REINFORCE with baseline
  double baseline_rate = 0.02;
  DviOptimizer optimizer = DviOptimizer::Adam;
  double lr = 1e-2;
  double beta1 = 0.9, beta2 = 0.999, adam_eps = 1e-8;  // Adam
  double max_grad_norm = 5.0;  // clip of the global gradient norm; 0 = off
  uint64_t seed = 0xd71;       // Philox key of the replay sample
};

struct DviTuple {
  std::vector<float> z;            // [dim]
  std::vector<float> base_logits;  // [vocab]
  int32_t token = 0;
  int32_t prev_token = -1;
  float reward = 0;
  float logq_behavior = 0;
  std::vector<int32_t> p_ids;      // [k]
  std::vector<float> p_probs;      // [k]
};

struct DviStats {
  int64_t tuples = 0;          // logged over the run
  int64_t rewarded = 0;        // of which r = 1
  int64_t updates = 0;         // optimizer steps (KL phase + RL phase)
  int64_t kl_phase_updates = 0;
  double train_s = 0;          // wall time in optimizer steps
  double log_s = 0;            // wall time building tuples (target softmax / top-k), set by the drafter
  double baseline = 0;         // current b
  DviLossValue last_loss;      // loss of the last step's batch, before the step
  double last_grad_norm = 0;   // before clipping
};

class DviTrainer {
 public:
  // `head` must outlive the trainer. Throws ssd::Error for options out of range.
  DviTrainer(LoraHead& head, const DviOptions& opts);

  const DviOptions& options() const { return o_; }
  const DviStats& stats() const { return st_; }
  DviStats& stats() { return st_; }
  size_t buffer_size() const { return buf_.size(); }
  bool in_rl_phase() const { return st_.updates >= o_.kl_updates; }
  // Weights of the next step (the schedule) with the current baseline.
  DviLossWeights current_weights() const;

  // p~ from a target logits row [vocab]: softmax at temperature 1, top-k (ties: lower id),
  // renormalised over the kept tokens.
  void target_dist(const float* logits, std::vector<int32_t>& ids, std::vector<float>& probs) const;

  // Logs a tuple (the oldest is dropped beyond capacity), updates the baseline, and runs a step
  // once `train_every` tuples have arrived since the last one. Returns true when it trained.
  bool add(DviTuple t);
  // One optimizer step (minibatch as above); returns the batch loss before the step.
  DviLossValue step();

 private:
  // Buffer indices of the next step's minibatch.
  std::vector<size_t> minibatch() const;

  LoraHead& head_;
  DviOptions o_;
  std::deque<DviTuple> buf_;
  int64_t since_step_ = 0;
  std::vector<float> gA_, gB_;            // gradients [r, dim], [vocab, r]
  std::vector<float> mA_, vA_, mB_, vB_;  // Adam moments, same shapes
  DviStats st_;
};

}  // namespace ssd
