// The drafter side of speculative speculative decoding (SSD, Saguaro, from "Speculative Speculative
// Decoding") as a state machine, rank-independent: no threads, no MPI. The drafter actor (one rank,
// or several sharing the pre-speculation work) drives it; a single process can drive it against a
// local target.
//
// One round, for the active sequences (each has a current speculation s being verified):
//   on_outcome(outcomes)   the verifier's decision per sequence: accepted count k and the emitted
//                          tokens (k accepted + the bonus). Commits them to the drafters, feeds
//                          the estimators, looks the outcome up in the speculation cache and
//                          returns each sequence's next speculation: the cached one on a hit, else
//                          a fallback chosen by the miss policy for this batch size
//                          (miss_policy.h): the primary drafter drafting now, or the backup
//                          speculator (n-gram).
//   prespeculate()         for the speculations just returned (while the target verifies them):
//                          predict their outcomes with the current fan-out (outcome_prediction.h,
//                          fan_out.h), draft K tokens after every predicted outcome of every
//                          sequence in ONE Drafter::draft() call (many requests per sequence, each
//                          with its hypothetical suffix: a tree of forks over the shared prefix in
//                          the model drafters, see model_draft_runner.h), and replace the cache.
//                          Split as plan_branches() -> draft_branches(subset) -> install(entries),
//                          so several drafter ranks can each draft a share of the branches (the
//                          cache budget grows with draft compute) and one merges the entries.
//                          plan_branches() lists the branches likeliest first (Branch::weight),
//                          so a pre-speculation cut short keeps the ones most worth having.
// Cut-short pre-speculation (SsdDrafterOptions::prespec_chunk > 0): the actor drafts the plan in
// chunks of that many branches, likeliest first, and stops at the first chunk boundary after the
// round's outcome has arrived (the first chunk is always drafted), so a drafter slower than
// verification holds the target for about one chunk rather than the whole plan. It installs what
// it has with install(entries, planned). The fan-out estimator is fed whether the real outcome
// was *planned* (among the predicted branches), not whether it was drafted in time: the power law
// it fits describes the prediction, and a cut would otherwise read as a worse predictor and
// shrink the plan. (The SSD reference drafts every branch in one batch: prespec_chunk = 0, the
// default here too.)
// Round 0: start() each sequence (prompt + the tokens emitted so far, i.e. the target's first
// token), first_speculations() drafts synchronously, then prespeculate().
//
// Speculation length (--k auto, runtime/spec/spec_length.h): the target leader chooses each
// sequence's next length k' in 0..K and sends it with the outcome (RoundOutcome::next_k; round 0:
// first_speculations' ks). The answer, from the cache or a fallback, is cut to k' tokens (a
// chain's prefix keeps every q, so it verifies exactly) with its ranking up to position k', and
// its fan-out re-planned for k'; a fallback drafts k' + 1 tokens.
//
// Pre-speculation depth. The next round's k' is not known while its branches are drafted, but the
// length just asked (Speculation::asked) is the best guess of it: a branch after a speculation
// asked at k drafts min(K, k + kDepthMargin) tokens (+ 1 for the ranking), not K. Under a fixed
// --k nothing changes; under --k auto, which on a CPU mostly asks 1 or 2 tokens, pre-speculation
// costs a fraction of a K-deep one, so less of it outlasts the verification it hides behind. A hit
// whose entry is shorter than the length then asked answers with what it has (fewer tokens,
// still exact); the length can grow by kDepthMargin per round through the cache, by any amount
// through a miss.
//
// Decode steps (k' = 0). A length of 0 is a plain decode step, as in single-process SD: the answer
// is an empty speculation of source kDecodeStep, found by no lookup (neither hit nor miss) and
// drafted by no one (not even the one token whose ranking would predict the bonus), and
// plan_branches() plans nothing after it, so the drafter spends no compute on the sequence until
// the leader asks for a length again (then a miss: a fallback draft of that length). The actor
// sends no decode step to the target (the leader knows which lengths it asked; protocol.h).
// Outcomes of decode steps do not count in the lookup figures (rounds, hits, predicted).
// Except with a primary that drafts cheaply (Drafter::drafts_cheaply: the lookup drafters): there
// a decode step is ranked (a one-token draft: its ranking at position 0 is the drafter's guess of
// the token the step emits, Speculation::predicted) and pre-speculated like any speculation of
// length 0, one branch per likely token, so the round after it can hit (the length policy's
// probes leave decode steps often). It still sends nothing to the target.
//
// Speculations carry K tokens and the q of each (verification needs q when sampling). The drafter
// is asked for K + 1 tokens: the (K + 1)-th node's ranking (DraftTree::predicted) predicts the
// bonus at k = K; only K tokens go to the target. Every draft request asks for predict_top =
// max F_k + 1 alternatives per position (the drafted token is skipped for k < K). With
// saguaro_c < 1 and sampling, the drafter reshapes the draft distributions (saguaro_sampling.h)
// with the F_k of the plan the speculation will be predicted with (after a hit for cache entries,
// after a miss for fallbacks); the node's q is the reshaped one, so verification stays exact.
//
// Philox: a sequence's draft for output index n (its first drafted token) uses position n and the
// sequence's stream, as SD does (sd_generation.h); a pre-speculated branch for outcome (k, bonus)
// of a speculation drafted at n uses position n + k + 1, exactly what a synchronous draft after
// that outcome would use. Sampled SSD therefore draws what sampled SD would, hit or miss.
//
// Online learning: on_outcome() passes each outcome to the primary's observe() as the DraftOutcome
// of the speculation's chain (path = the k accepted nodes, the emitted tokens, the target's rows)
// when the RoundOutcome carries the target logits. When the drafter rank does not have them (the
// target sits on other ranks and sends only (k, emitted)), observe() is not called: DraftOutcome
// promises the target's rows and the learning drafters read them. The drafter then gets the
// emitted tokens only (through commit()): hard labels, enough for acceptance statistics, not for
// distillation against p; shipping the rows (or their top entries) is the actor's choice. (The
// early-exit drafter matches observe() against the drafts of its latest draft() call only; under
// SSD the verified speculation comes from an earlier call, so its DVI learning needs that drafter
// to keep the drafts of two calls: not done here.)
//
// Misses drafted by the target leader (--miss-at leader). When a miss would be answered by a lookup
// drafter (the primary is one, or the miss policy chooses the backup: miss_lookup()), the answer
// costs the drafter microseconds and the leader a round trip. The drafter tells the leader
// miss_lookup() with its answers and pushes; the leader, holding every token of the context,
// drafts such a miss itself with its own copy of that drafter and sends the speculation with the
// outcome (RoundOutcome::given). on_outcome() adopts it as the sequence's speculation (a miss,
// counted in leader_drafted, never looked up in the cache), ranks it with its own lookup for the
// pre-speculation (the ranking is kept up to the first token where the two drafts differ: both
// copies see the same tokens, so they differ only if their options do), and the caller leaves the
// sequence out of its answer.
//
// Several drafter ranks: each runs a core over its own drafters. The lead's core runs
// first_speculations() and on_outcome(); the others call adopt(outcomes, speculations) with the
// lead's answers, so every core has the same speculations and plan_branches() gives the same list
// everywhere. The lead plans (plan_branches(): a Branch is self-contained, with its suffix,
// Philox position and fan-out) and hands each rank a share to draft_branches(); it install()s the
// union. Every rank draws its share from its own plan_branches(), so the plan must be one thing:
// adopt() feeds the secondary's fan-out estimator (a_p, r) from the same outcomes the lead's
// on_outcome() does (learn_plan), and the estimator reads nothing only the lead has (whether an
// outcome was planned is a function of the speculation; a cache hit is always planned). Otherwise
// the ranks' branch orders and fan-outs drift apart once the lead learns an a_p away from the
// prior: branches drafted twice or never, and secondaries reshaping q with stale fan-outs.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <span>
#include <vector>

#include "runtime/saguaro/fan_out.h"
#include "runtime/saguaro/miss_policy.h"
#include "runtime/saguaro/speculation.h"
#include "runtime/saguaro/speculation_cache.h"
#include "runtime/spec/drafter.h"

namespace ssd {

struct SsdDrafterOptions {
  int32_t k = 4;          // tokens per speculation sent to the target, 1..32
  SamplerConfig sampler;  // the requests' sampler (temperature 0 = greedy)
  FanOutOptions fan_out;
  double saguaro_c = 1.0;  // Saguaro sampling, in (0, 1]; 1 = off (greedy ignores it)
  MissPolicyOptions miss;
  int32_t predict_top = 0;  // alternatives asked per position; 0 = max F_k + 1
  int32_t prespec_chunk = 0;  // branches per draft call when pre-speculating; 0 = all at once
                              // (never cut short); see "Cut-short pre-speculation" above
  // The SD baseline on a drafter rank (no pre-speculation): every answer is the primary's plain
  // draft of exactly the requested length, asked as single-process SD asks it (no ranking of
  // alternatives, no Saguaro reshaping, no cache, no backup); a length of 0 drafts nothing.
  bool plain = false;
};

// One branch to pre-speculate: the outcome (k, bonus) of speculation `parent` of `seq`.
struct Branch {
  int32_t seq = 0;
  uint64_t parent = 0;
  int32_t k = 0;
  int32_t bonus = 0;
  std::vector<int32_t> suffix;   // [k + 1] the speculation's first k tokens, then the bonus
  uint32_t position = 0;         // Philox position of the branch's first drafted token
  std::vector<int32_t> fan_out;  // [K + 1] or empty (the drafting core's own): the after-hit plan
                                 // its speculation is drafted (Saguaro F) and predicted with
  int32_t depth = 0;  // tokens the branch's speculation holds (drafted: depth + 1 for the
                      // ranking); 0: K
  double weight = 0;  // estimated probability of the outcome: P(k) under the estimated acceptance
                      // rate times the bonus's weight in the drafter's ranking at position k
};

struct SsdDrafterStats {
  static constexpr size_t kSources = 5;  // SpecSource values
  int64_t rounds = 0;  // outcomes processed (one per sequence per round), decode steps' aside
  int64_t hits = 0, misses = 0;
  int64_t fallback_primary = 0, fallback_backup = 0;
  std::vector<int64_t> outcomes_at_k;                  // [K + 1] outcomes that accepted k tokens
  std::vector<int64_t> hits_at_k;                      // [K + 1] of those, cache hits
  std::array<int64_t, kSources> rounds_by_source{};    // verified speculations by SpecSource
  std::array<int64_t, kSources> accepted_by_source{};  // their accepted tokens
  int64_t prespec_calls = 0;                           // draft_branches() calls
  int64_t branches = 0;                                // branches drafted (by this core)
  int64_t branches_planned = 0;  // branches planned, over every install()
  int64_t branches_cached = 0;   // of those, drafted in time and installed
  int64_t prespec_cut = 0;       // installs that had fewer entries than planned branches
  int64_t predicted = 0;         // outcomes whose (k, bonus) was planned (hit when drafted)
  int64_t leader_drafted = 0;    // of the misses, speculations the leader drafted (given)
  double prespec_s = 0;                                // time in draft_branches()
  double fallback_s = 0;  // time in fallback drafts (primary and backup)
  double initial_s = 0;   // time in first_speculations()
  std::vector<int32_t> fan_out_after_hit, fan_out_after_miss;  // [K + 1] the latest plans

  double hit_rate() const;
  // Tokens per target verification (bonus included) for speculations from a hit, from a miss
  // (primary or backup fallback), and over all.
  double mean_acceptance_length_hit() const;
  double mean_acceptance_length_miss() const;
  double mean_acceptance_length() const;
};

class SsdDrafterCore {
 public:
  // `primary` (and `backup`, may be null: then misses always use the primary) must outlive the
  // core. Throws ssd::Error for bad options (naming them).
  SsdDrafterCore(Drafter& primary, Drafter* backup, const SsdDrafterOptions& opts);
  SsdDrafterCore(const SsdDrafterCore&) = delete;
  SsdDrafterCore& operator=(const SsdDrafterCore&) = delete;

  // A new sequence: the prompt, the tokens the target has emitted so far (at least the first one,
  // from the prefill) and the sequence's Philox stream.
  // The memory of earlier requests that sequences started from now on share (both drafters).
  void set_memory_scope(uint64_t scope);
  void start(int32_t seq, std::span<const int32_t> prompt, std::span<const int32_t> emitted,
             uint64_t stream);
  void finish(int32_t seq);
  // Target features for drafters that need them (forwarded to the primary).
  void set_features(int32_t seq, int64_t from, std::span<const float> features);
  // Floats per feature row the primary drafter reads (0: it reads none).
  int64_t feature_dim() const { return primary_.target_feature_dim(); }

  // Round 0: a synchronous draft for each of `seqs` (started, without a speculation yet), of
  // ks[i] tokens each (empty: K; 0: a decode step, nothing drafted).
  std::vector<Speculation> first_speculations(std::span<const int32_t> seqs,
                                              std::span<const int32_t> ks = {});
  // The next speculation of each outcome's sequence, in the outcomes' order (see the top).
  std::vector<Speculation> on_outcome(std::span<const RoundOutcome> outcomes);
  // For a secondary drafter rank: commit the outcomes (which must match the current speculations),
  // learn the plan from them as the lead does, and take the lead's answers as the current
  // speculations (no lookups, no statistics). Round 0:
  // adopt({}, the lead's first_speculations()).
  void adopt(std::span<const RoundOutcome> outcomes, std::span<const Speculation> next);

  // Every sequence's predicted outcomes as branches, by weight descending; ties keep a
  // round-robin over the sequences (each one's branches in k, then rank order).
  std::vector<Branch> plan_branches() const;
  // One primary draft() call for all `branches`; entries for the cache.
  std::vector<CacheEntry> draft_branches(std::span<const Branch> branches);
  // Replaces the cache with `entries`, drafted for a plan of `planned` branches (fewer entries:
  // the pre-speculation was cut short).
  void install(std::vector<CacheEntry> entries, int64_t planned);
  void prespeculate() {
    const std::vector<Branch> plan = plan_branches();
    install(draft_branches(plan), static_cast<int64_t>(plan.size()));
  }

  // The sequence's current speculation (ssd::Error when it has none).
  const Speculation& speculation(int32_t seq) const;
  const SsdDrafterStats& stats() const { return stats_; }
  const SpeculationCache& cache() const { return cache_; }
  const FanOutPlanner& fan_out() const { return planner_; }
  MissPolicy& miss_policy() { return miss_; }  // the caller reports verification times here
  // How a miss in a round of `batch` sequences would be answered now (see "Misses drafted by the
  // target leader" at the top): the one place the leader's --miss-at leader follows.
  MissLookup miss_lookup(int32_t batch) const;
  const SsdDrafterOptions& options() const { return opts_; }
  int32_t predict_top() const { return predict_top_; }
  static constexpr int32_t kDepthMargin = 1;  // see "Pre-speculation depth" at the top

 private:
  struct SeqState {
    uint64_t stream = 0;
    int64_t emitted = 0;  // output tokens so far: the Philox position of the next one
    bool has_spec = false;
    Speculation spec;
    // The backup's draft beside a primary fallback (greedy, cheap backup): scored against the
    // outcome for the miss policy's L_b (MissPolicy::observe_shadow).
    bool has_shadow = false;
    std::vector<int32_t> shadow;
  };
  SeqState& state(int32_t seq);
  const SeqState& state(int32_t seq) const;
  // A request for a speculation of k tokens (K + 1 drafted for the ranking; plain: k).
  DraftRequest request(int32_t seq, const SeqState& s, std::vector<int32_t> suffix,
                       uint32_t position, const std::vector<int32_t>& fan_out, int32_t k) const;
  // A decode step (k' = 0) of `seq`, ranked for pre-speculation when the primary drafts cheaply
  // (see "Decode steps" at the top).
  Speculation ranked_decode_step(int32_t seq, uint64_t id);
  // Cuts `spec` to k tokens (no-op when it is not longer, or k = -1), re-planning its fan-out.
  void cut(Speculation& spec, int32_t k, bool after_hit) const;
  // Drafts the speculations of outcomes[i] for i in `missed` (a miss, or plain SD; initial:
  // round 0, with the primary and not counted as a fallback): see the top.
  void fallback(std::span<const RoundOutcome> outcomes, std::span<const size_t> missed,
                std::vector<Speculation>& out, bool initial = false);
  // Whether the primary answers a miss in a round of `batch` sequences (else the backup).
  bool primary_answers_miss(int32_t batch) const;
  // The speculations the leader drafted (outcomes[i].given for i in `given`), ranked here by the
  // lookup drafter the leader copied, up to the first token where its draft differs.
  void adopt_given(std::span<const RoundOutcome> outcomes, std::span<const size_t> given,
                   std::vector<Speculation>& out);
  // fan_out: [K + 1] the plan the draft was asked with; a draft cut short (K' < K) is re-planned
  // for K'.
  Speculation from_tree(int32_t seq, DraftTree tree, SpecSource source,
                        const std::vector<int32_t>& fan_out, bool after_hit) const;
  // Throws ssd::Error naming what is wrong with an outcome (nothing is changed).
  void check_outcomes(std::span<const RoundOutcome> outcomes) const;
  static void check_outcome(const RoundOutcome& o, const Speculation& spec);
  static void check_given(const RoundOutcome& o, int32_t k_max);
  // Feeds the fan-out estimator (a_p and the power law r) with the outcome (k, bonus) of `spec`;
  // returns whether the outcome was planned. The lead (on_outcome) and every secondary (adopt)
  // call it with the same outcomes, so every rank's plan_branches() is the same list.
  bool learn_plan(const Speculation& spec, int32_t k, int32_t bonus);
  void check_features(const RoundOutcome& o) const;
  // Observe (with target logits), commit the emitted tokens to the drafters, advance the count.
  void commit(const RoundOutcome& o, const Speculation& spec, SeqState& s);

  Drafter& primary_;
  Drafter* backup_;
  SsdDrafterOptions opts_;
  FanOutPlanner planner_;
  MissPolicy miss_;
  SpeculationCache cache_;
  int32_t predict_top_ = 1;
  std::map<int32_t, SeqState> seqs_;
  SsdDrafterStats stats_;
};

}  // namespace ssd
