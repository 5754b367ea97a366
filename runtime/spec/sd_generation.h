// Speculative decoding (draft, then verify), the synchronous baseline of SSD. Each round the
// drafter proposes, for every sequence still generating, a tree of up to K tokens deep after its
// last emitted token (the root); the target runs ONE forward over every root + tree
// (verify_round.h), the verifier accepts a path per sequence and emits one more token (correction
// or bonus), and each sequence's KV keeps only root + path. A sequence whose draft is empty
// decodes one token in the same forward. Output equals AR output token for token under greedy
// decoding, and has the target's distribution under sampling, whatever the drafter does; each
// request uses its own Philox stream, so its tokens do not depend on the batch it ran in.
//
// Speculation length: a fixed K, or under --k auto (SdOptions::auto_k) a length in 0..K chosen
// per request and round by the length policy (spec_length.h) from this run's measured costs and
// acceptance; 0 makes that request's round a plain decode step.
//
// Batches: every request is prefilled (one after the other) and started on the drafter, then the
// rounds run over the requests still generating: one drafter call (every request of the round)
// and one target forward per round. A request leaves the batch when it reaches its
// max_new_tokens or an end-of-generation token; its target sequence and drafter state are
// released at once. The drafter sees request i of the batch as sequence i.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "runtime/generate/generation.h"
#include "runtime/spec/drafter.h"
#include "runtime/spec/spec_length.h"
#include "runtime/spec/verify.h"

namespace ssd {

struct SdOptions {
  int32_t k = 4;      // draft depth (tokens per branch), 1..32; with auto_k the top of the range
  int32_t width = 1;  // first-level branches asked of the drafter (1 = chain)
  bool auto_k = false;  // choose k in 0..k per sequence and round (spec_length.h)
  // The length policy to use (and keep learning in) across calls, e.g. one per benchmark
  // configuration so its cost lines carry over prompts; null: a fresh one for this call. Its
  // k_max and automatic must match k and auto_k.
  SpecLengthController* length = nullptr;
};

// Counters of one request, or of a whole batch (then the counters are summed over its requests
// and the times are wall times of the batch's calls, each counted once).
struct SdStats {
  int64_t rounds = 0;             // sequence-rounds: one per sequence per verification forward
  int64_t forwards = 0;           // target verification forwards (== rounds for one request)
  int64_t accepted = 0;           // draft tokens accepted over all rounds
  int64_t drafted = 0;            // draft tree nodes proposed over all rounds
  int64_t verified_rows = 0;      // rows of the verification forwards (each root + its tree)
  int64_t empty_drafts = 0;       // rounds without a draft (one token decoded, as AR)
  int64_t full_accepts = 0;       // rounds whose path reached a leaf (the last token a bonus)
  std::vector<int64_t> accept_hist;      // [k + 1]: rounds that accepted 0..k tokens
  std::vector<int64_t> pos_accepted;     // [k]: rounds whose path reached depth j + 1
  std::vector<int64_t> pos_offered;      // [k]: rounds whose draft had depth >= j + 1
  std::vector<int64_t> chosen_k_hist;    // [k + 1]: rounds whose chosen draft length was 0..k
  double draft_s = 0;   // wall time inside the drafter (draft, commit, observe)
  double verify_s = 0;  // wall time of the target's verification forwards and the verifier
  double target_forward_s = 0;  // the verification forwards alone (part of verify_s)

  // Tokens emitted per sequence-round, bonus included: 1 + accepted / rounds.
  double mean_acceptance_length() const;
  // Per draft position j: P(position j accepted | the draft offered position j).
  std::vector<double> acceptance_rate_per_position() const;
  // Sequences verified per forward: rounds / forwards.
  double mean_batch() const;
};

// SdStats bookkeeping shared by every driver of verification rounds (this file's loops and the
// distributed target leader): size the per-K counters, and count one sequence-round (the caller
// adds the times).
void size_stats(SdStats& s, int32_t k);
// chosen_k: the length the round asked of the drafter (the tree may be shorter).
void count_round(SdStats& s, const DraftTree& tree, const VerifyResult& v, int32_t k,
                 int32_t chosen_k);

struct SdResult {
  GenerationResult gen;
  SdStats stats;
};

// One request's part in one verification round: what the round simulator's outcome trace
// records (topology/sim/outcome_trace.h), kept here without depending on it.
struct SdRoundRecord {
  int64_t round = 0;     // verification forward of the batch, from 0
  int32_t seq = 0;       // request index in the batch
  int32_t k = 0;         // draft tokens offered (tree nodes; 0: a plain decode step)
  int32_t accepted = 0;  // draft tokens accepted
};

// One verification round of the batch as the length policy saw it (`ssd bench --round-times`):
// the rows the forward verified and the two times the policy's cost curves are fitted from.
struct SdRoundTime {
  int64_t rows = 0;      // verified rows: the batch's sequences plus their draft nodes
  double draft_s = 0;    // the round's Drafter::draft call (0: no sequence drafted)
  double verify_s = 0;   // the target's forward and the verifier
  int64_t emitted = 0;   // tokens the round emitted over the batch (a stop token or the budget
                         // may end a sequence's early)
};

struct SdBatchResult {
  std::vector<SdResult> requests;  // in request order; each request's own counters and times
  SdStats stats;                   // the batch: counters summed, times of the batch's calls
  std::vector<SdRoundRecord> log;  // every (round, request) verified, in order
  std::vector<SdRoundTime> round_times;  // [stats.forwards] every round, in order
  // The drafter's time before the first round (start with the prompt, its features, the first
  // token's commit): part of stats.draft_s, so stats.draft_s - this is the rounds' share.
  double drafter_start_s = 0;
};

// Runs the request with `drafter` on a fresh target sequence (released afterwards). The drafter
// sees sequence id 0. Throws ssd::Error before any work for a bad K or width, or a request that
// does not fit the context (prompt + max_new_tokens + K positions are needed).
SdResult generate_sd(TargetModel& target, Drafter& drafter, const GenerationRequest& req,
                     const SdOptions& opts, const TokenCallback& on_token = {});

// Runs every request together, as described above. Throws ssd::Error before any work for a bad
// K or width, a malformed request, or a batch that does not fit the target's cache at once
// (check_batch_context with K positions ahead per request).
SdBatchResult generate_sd_batch(TargetModel& target, Drafter& drafter,
                                std::span<const GenerationRequest> reqs, const SdOptions& opts,
                                const BatchTokenCallback& on_token = {});

}  // namespace ssd
