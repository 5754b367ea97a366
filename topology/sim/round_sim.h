// The round simulator: AR, SD and SSD decoding of a batch of sequences on a described cluster,
// event by event (one verification, one draft call, one message at a time), with the costs of
// roofline.h and the outcomes of acceptance_model.h or of a recorded outcome trace.
//
//   AR   the target alone: one TP forward of B rows per step.
//   SD   per round: the drafter drafts K tokens for every active sequence (after the outcome of
//        the previous round reached it), sends them; the target verifies B (K + 1) rows in one
//        forward and sends the outcome back. Nothing overlaps (colocated: the same device drafts
//        then verifies, with no link).
//   SSD  as the drafter actor does it (drafter_actor.cpp): after answering round r the lead
//        starts pre-speculating the branches of round r's likely outcomes (branch_plan.h), split
//        over the drafter ranks, while the target verifies; the outcome cuts a chunked job at its
//        next chunk boundary; the lead installs what was drafted, looks each sequence's real
//        outcome up (hit: the cached speculation; miss: the primary drafts now when B <= b*, else
//        the backup answers at once with its lower acceptance) and answers.
//
// Time is decode time only (prefill is not simulated). Outcomes: parametric (the SimConfig's
// acceptance, a seeded RNG: the same config gives the same run) or replayed from a trace (its
// rounds, sequences, k, accepted counts and, for SSD, hits: the replay reproduces the trace's
// counts exactly and simulates only the time).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runtime/saguaro/miss_policy.h"
#include "runtime/saguaro/prespec_budget.h"
#include "runtime/saguaro/prespec_switch.h"

#include "topology/sim/outcome_trace.h"
#include "topology/sim/sim_config.h"

namespace ssd::sim {

// One span of the simulated timeline (a Chrome trace "X" event).
struct SimEvent {
  int32_t rank = 0;
  std::string role;  // "target", "drafter", "link"
  std::string name;  // "verify", "draft", "prespec", "fallback", "outcome", "speculation", ...
  double start_s = 0, dur_s = 0;
};

struct SimResult {
  SimMode mode = SimMode::kAr;
  double seconds = 0;     // simulated decode time
  int64_t tokens = 0;     // generated tokens, all sequences
  int64_t rounds = 0;     // target forwards (verifications, or AR steps)
  int64_t seq_rounds = 0; // (round, sequence) pairs
  int64_t hits = 0, misses = 0;  // SSD lookups (the last round of a sequence has none)
  int64_t planned = 0;           // SSD outcomes that were among the planned branches
  int64_t fallback_primary = 0, fallback_backup = 0;
  int64_t leader_drafted = 0;  // SSD misses the target leader drafted itself (--miss-at leader)
  int64_t rounds_waited = 0;   // SSD rounds whose verification waited for the drafter's answer
  int64_t branches_drafted = 0, branches_planned = 0;
  double target_busy_s = 0;   // target forwards, TP collectives excluded
  double target_wait_s = 0;   // target idle, waiting for a speculation
  double drafter_busy_s = 0;  // drafting, mean over drafter ranks
  double comm_s = 0;          // TP collectives + drafter-link messages (summed)
  int32_t b_star = 0;
  std::vector<int32_t> fan_out;  // SSD: the plan at full K
  std::vector<SimEvent> events;
  std::vector<OutcomeRecord> outcomes;  // what happened (a trace a replay reproduces)

  double tokens_per_s() const { return seconds > 0 ? double(tokens) / seconds : 0; }
  double mal() const { return seq_rounds ? double(tokens) / double(seq_rounds) : 0; }
  double hit_rate() const { return hits + misses ? double(hits) / double(hits + misses) : 0; }
};

// What a job carries from one batch to the next: the drafter lead's miss policy and its
// draft-what-fits budget (members of the drafter actor), the leader's pre-speculation switch (a
// member of RemoteDecoder, kept across run() calls). Empty: each starts afresh. Simulating a job's
// batches in order with one carry (per mode) starts each batch where the job's previous one left
// them: a model drafter whose 32-branch calls do not fit drafts three rounds in the job's first
// batch and none after, not three in every batch.
struct SimCarry {
  std::optional<MissPolicy> policy;
  std::optional<PrespecBudget> budget;
  std::optional<PrespecSwitch> regime;
};

// `replay`: null for parametric outcomes, else the trace to replay (its batch replaces
// cfg.work.batch; its k per record replaces cfg.work.k). `carry` (SSD): the state an earlier
// batch of the same job left, updated with this batch's; null: a job of this batch alone.
SimResult simulate(SimMode mode, const SimConfig& cfg,
                   const std::vector<OutcomeRecord>* replay = nullptr, SimCarry* carry = nullptr);

// The closed-form expectation of one round at batch cfg.work.batch (no events, no sampling): the
// theory the event simulation is checked against. With T_v the verification, T_d(m) the primary's
// draft for m sequences, T_pre the pre-speculation of B x budget / D branches on each drafter rank,
// l_o and l_s the outcome and speculation messages, h the plan's hit rate, L_p / L_b the expected
// tokens per round of primary / backup speculations:
//   SD   B L_p / (T_v + T_d(B) + l_o + l_s)
//   SSD  B (h L_p + (1 - h) L_f) / (max(T_v + l_o, T_pre') + (1 - h^B) T_f + l_s)
// where the fallback (f) is the primary (T_f = T_d(B (1 - h)), L_f = L_p) at B <= b*, else the
// backup (an n-gram lookup, L_f = L_b), and T_pre' = T_pre, or with chunks at most T_v + l_o +
// one chunk (the cut). With --miss-at leader and a lookup fallback (a lookup primary, or the
// backup past b*) no round waits for an answer:
//   SSD  B (h' L_p + (1 - h') L_f) / (T_v + T_l)
// with T_l the leader's lookups of B (1 - h) sequences and h' = h when the pre-speculation is
// pushed back within the next verification (T_pre + 2 l <= T_v + T_l), else, in chunks, h times
// the share drafted in time, and in one call 0 (a late push is no hit: the leader drafts it).
struct AnalyticEstimate {
  double verify_s = 0, draft_s = 0, prespec_s = 0, fallback_s = 0;
  double hit_rate = 0;
  double sd_tokens_per_s = 0, ssd_tokens_per_s = 0, ar_tokens_per_s = 0;
};
AnalyticEstimate analytic_estimate(const SimConfig& cfg);

// The b* the SSD miss policy would derive from the simulated costs (miss_policy.h).
int32_t derived_critical_batch(const SimConfig& cfg);

// The verifier's host seconds around a target forward of `rows` rows (hw_profile.h).
double verify_host_seconds(const DeviceProfile& device, double rows);

// Seconds of one draft call of `drafter` for `n` sequences (or branches), each with `suffix` new
// tokens to take in and k tokens to draft (k + 1 asked when `predict_bonus`), at `context`.
// `kv_seqs` (default n) is how many distinct sequences' cached prefixes are read: the branches of
// one sequence share its prefix and one batched tree-masked forward reads it once for all of them.
// When `device` carries a fit for this drafter (DeviceProfile::drafter_fits, keyed by its shape's
// name), the call is priced with it: its roofline figures, per-forward and per-call costs.
// An autoregressive drafter's first forward also takes in the committed token its runner held
// back (n x (suffix + 1) rows, one logits row each request); with nothing to draft (k = 0, no
// ranking: a start on the prompt) the call is that catch-up alone, n x suffix rows, no logits.
double draft_seconds(const SimDrafter& drafter, const DeviceProfile& device, double n,
                     double suffix, int32_t k, double context, bool predict_bonus,
                     double kv_seqs = -1);

}  // namespace ssd::sim
