// The target leader's side of a run whose drafter lives on other ranks (--mode sd or ssd with
// drafter ranks): rank 0 prefills each batch of requests on the (tensor-parallel) target, starts
// the sequences on the drafter ranks, and then runs rounds: receive every sequence's speculation
// (kSpeculation), verify all of them in ONE target forward (verify_round), send the outcome
// (kOutcome: accepted count, emitted tokens, the accepted tokens' target features if the drafter
// conditions on them), and go on. One exchange per round with the drafter lead; in --mode ssd the
// drafter pre-speculated the answer while the target was verifying, in --mode sd it drafts it
// after the outcome arrives. The output is the target's: greedy token for token, sampled with the
// target's distribution (verification is the same code as single-process SD).
//
// Speculation length (--k auto): the leader owns the length policy (runtime/spec/spec_length.h)
// and decides every sequence's next k, sending it with the outcome (SeqOutcome::next_k; round 0
// in StartSeqs::first_k); the drafter cuts its answer to it. The leader decides because it holds
// every input: the verified outcomes and the round's costs as it sees them (its wait for the
// speculation, which is the drafting not hidden, and its verification forward); the drafter
// would have to be sent the same data to compute the same k. Under a fixed --k it sends K.
// A length of 0 is a plain decode step: no speculation comes for it, and a round whose lengths
// are all 0 is verified at once, without waiting for the drafter (protocol.h, SpeculationMsg), so
// under SSD as under SD it costs what an autoregressive step costs.
// One policy per mode (sd, ssd), kept across run() calls: their costs differ.
//
// Pre-speculation that does not pay (ssd): the leader's PrespecSwitch (runtime/saguaro/
// prespec_switch.h) runs rounds in blocks with pre-speculation on or off (Outcome::prespeculate)
// and keeps the regime it measures faster, so SSD on ranks that share cores falls back to
// drafting after each outcome, as SD does, rather than losing to it. Each regime has its own
// length policy (their costs differ as SD's and SSD's do).
//
// Misses drafted here (ssd, --miss-at leader; set_leader_lookups): when an outcome is not in the
// drafter's push and the drafter said its misses are answered by a lookup (its latest
// SpeculationMsg/PrespecPush::miss_lookup), the leader drafts the next speculation itself with its
// copy of that lookup (leader_lookup.h) and sends it with the outcome (SeqOutcome::leader_drafted):
// no wait for an answer. The copies see every sequence's start, tokens and finish, in sd as in ssd.
// Pushes, misses drafted here, the frames and the heartbeats are the DrafterLeadLink's
// (drafter_lead_link.h), which the server's RemoteEngine shares.
//
// Figures: the SD statistics of every request, plus what only a split run has: target_wait_s
// (the leader's time from sending an outcome to having the next speculation, i.e. drafting that
// was not hidden), bytes_exchanged on the drafter link, and the drafter's own figures (cache hit
// rate, acceptance after hits and misses, its busy time, the fan-out it used) fetched at the end.
//
// A lost drafter rank, the lead or another (drafter_loss.h): under a continue policy the leader
// stops talking to the drafter ranks, prints one line, and finishes the run with the target's
// output: every later speculation is drafted here with a lookup copy (DrafterLeadLink::draft_here,
// at the length the policy chooses), SD in the target's process: the copy held under --miss-at
// leader, else one the link builds at the loss and starts on every running sequence's prompt and
// emitted tokens (lose()). Only when no copy can be built does every later round verify
// an empty speculation (a plain target step). The result records the loss.
#pragma once

#include <optional>
#include <span>
#include <vector>

#include "actors/roles/drafter_lead_link.h"
#include "actors/roles/drafter_loss.h"
#include "actors/roles/fault_injection.h"
#include "actors/roles/heartbeat.h"
#include "actors/roles/leader_lookup.h"
#include "actors/roles/round_speculations.h"
#include "actors/transport/protocol.h"
#include "actors/transport/rank_layout.h"
#include "actors/transport/transport.h"
#include "actors/transport/watchdog.h"
#include "runtime/generate/generation.h"
#include "runtime/saguaro/prespec_switch.h"
#include "runtime/spec/sd_generation.h"
#include "runtime/spec/verify_round.h"
#include "topology/sim/outcome_trace.h"

namespace ssd {

struct SplitFigures {
  double target_wait_s = 0;
  double verify_s = 0;
  int64_t bytes_exchanged = 0;  // drafter-link frames sent and received by the leader
  int64_t rounds = 0;           // verification forwards
  // Sequence-rounds by where their speculation came from (round 0's initial draft is neither).
  int64_t hits = 0, misses = 0;
  int64_t accepted_hit = 0, accepted_miss = 0;
  // Sequence-rounds at length 0: plain decode steps, verified without a speculation or a wait.
  int64_t decode_steps = 0;
  int64_t rounds_prespec_off = 0;  // ssd: rounds whose outcome turned pre-speculation off
  int64_t pushed = 0;  // ssd: hits taken from the drafter's push (no wait for an answer)
  // ssd, --miss-at leader: misses the leader drafted itself (leader_lookup.h; no wait either)
  int64_t leader_drafted = 0;
  int64_t rounds_waited = 0;  // rounds whose speculations waited for the drafter's answer
  DrafterStatsMsg drafter;      // the drafter lead's figures over the run (busy time, fan-out)

  double hit_rate() const { return hits + misses ? double(hits) / (hits + misses) : 0.0; }
  // The share of the drafter's outcomes whose (k, bonus) was among the planned branches: the hit
  // rate had every branch been drafted in time (they differ only when pre-speculation was cut).
  double predicted_rate() const {
    return drafter.rounds ? double(drafter.predicted) / double(drafter.rounds) : 0.0;
  }
  // "0.41", or "0.30 (0.41 planned)" when pre-speculations were cut short.
  std::string hit_rate_text() const;
  double mean_acceptance_length_hit() const { return hits ? 1.0 + double(accepted_hit) / hits : 0; }
  double mean_acceptance_length_miss() const {
    return misses ? 1.0 + double(accepted_miss) / misses : 0;
  }
  void add(const SplitFigures& o);  // sums counters and times (the drafter's plan: the later one's)
};

// The drafter's figures accumulated between two reads (counters and times subtracted).
DrafterStatsMsg since(const DrafterStatsMsg& after, const DrafterStatsMsg& before);

struct RemoteDecodeResult {
  std::vector<GenerationResult> gen;  // per request
  std::vector<SdStats> sd;            // per request
  SplitFigures split;
  // Every verified (round, request) as the round simulator's outcome trace records it (seq = the
  // request's index): k offered, accepted, and in ssd whether that outcome was answered from the
  // cache (known from the next speculation's source; absent for a request's last round) and
  // whether this leader drafted its next speculation itself (--miss-at leader), and for a miss
  // the drafter rank answered, whether with its backup. The bonus's rank lives on the drafter
  // rank and is not recorded (-1).
  std::vector<sim::OutcomeRecord> outcomes;
  std::optional<DrafterLoss> drafter_loss;  // a drafter rank was lost (in this run or before)
};

class RemoteDecoder {
 public:
  // `feature_layers`: what the drafter asked for in its kDrafterReady.
  // k: the speculation length, or with auto_k the top of its range. length_cycle: fixed lengths
  // in turn instead (SpecLengthOptions::cycle; tests of length changes), empty: off.
  RemoteDecoder(TargetModel& target, Transport& world, const RankLayout& layout,
                std::vector<int32_t> feature_layers, int32_t k, Watchdog& dog, double step_s,
                bool auto_k = false, std::vector<int32_t> length_cycle = {},
                const PrespecSwitchOptions& prespec = {});

  // Runs the requests together (B = reqs.size()); greedy output equals generate_ar_batch's.
  // prespeculate: ssd (the drafter pre-speculates during verification) or sd (it drafts after).
  // memory_scope: which memory of earlier requests the drafters use for these
  // (Drafter::set_memory_scope).
  RemoteDecodeResult run(std::span<const GenerationRequest> reqs, bool prespeculate,
                         const BatchTokenCallback& on_token = {}, uint64_t memory_scope = 0);
  const PrespecSwitch& prespec_switch() const { return prespec_; }
  // The drafter lead's figures so far (one request/answer).
  DrafterStatsMsg drafter_stats();
  // Tells every drafter rank to stop (call once, at the end of the job): the lead, which
  // relays it, or after a loss every drafter rank but the lost one.
  void shutdown_drafters();
  // What to do when the drafter lead dies or misses a deadline (default: abort the job).
  void set_loss_policy(DrafterLossPolicy policy) { link_.set_loss_policy(std::move(policy)); }
  const std::optional<DrafterLoss>& loss() const { return link_.loss(); }
  // A loss another engine of this job found (the server's RemoteEngine), already reported: kept
  // as this decoder's (the first one stays), so shutdown_drafters() and the job know of it.
  void note_loss(const DrafterLoss& loss) { link_.note_loss(loss); }
  // The leader's fault points (fault_injection.h): prefill, round and prespec; none by default.
  void set_faults(const FaultInjector* faults) { faults_ = faults; }
  // ssd: ask the drafter to push each pre-speculation (PrespecPush) and take hits from it
  // (default on); off: every speculation comes in the drafter's answer.
  void set_push(bool on) { link_.set_push(on); }
  // The leader's lookup copies (leader_lookup.h): from_start (ssd, --miss-at leader) drafts here
  // the misses the drafter would answer with a lookup; at_loss builds them at a lost drafter rank
  // when there are none. Neither by default (--miss-at drafter, plain decoding after a loss).
  // Set before the first run(): a copy held from the start must see every sequence the drafter
  // rank sees.
  void set_leader_lookups(LeaderLookups lookups) { link_.set_leader_lookups(std::move(lookups)); }

 private:
  struct Run;  // one run's requests, results and sequences (remote_decode.cpp)
  void start_sequences(Run& run, bool prespeculate);
  void take_speculations(Run& run, int64_t round);
  void speculate_without_drafter(Run& run, RoundSpeculations& specs);
  // Records a loss (DrafterLeadLink::lose) with the run's running sequences.
  void lose(const Run& run, const DrafterLost& e, int64_t round);
  // Request i's next speculation was drafted here: counted, and marked in the outcome trace.
  void note_leader_drafted(Run& run, size_t i);
  VerifyInput verify_input(Run& run, size_t i, DraftTree& tree) const;
  void verify_round_and_answer(Run& run, const std::vector<size_t>& active, int64_t round);
  std::optional<SeqOutcome> apply_verification(Run& run, size_t i, const VerifyResult& v);
  // The outcomes of `still` whose next speculation needs no answer: found in the round's push,
  // or drafted here (--miss-at leader; DrafterLeadLink::ahead).
  void take_ahead(Run& run, int64_t round, const std::vector<size_t>& still, Outcome& outcome);

  TargetModel& target_;
  Transport& world_;
  const RankLayout& layout_;
  std::vector<int32_t> feature_layers_;
  int32_t k_;
  SpecLengthController sd_length_, ssd_length_;
  SpecLengthController ssd_off_length_;  // ssd rounds with pre-speculation off
  PrespecSwitch prespec_;
  Watchdog& dog_;
  double step_s_;
  DrafterLeadLink link_;  // frames, pushes, misses drafted here, the loss
  int32_t next_seq_id_ = 0;
  DrafterStatsMsg last_stats_;  // the drafter's figures as last fetched (kept after a loss)
  const FaultInjector* faults_ = nullptr;
};

}  // namespace ssd
