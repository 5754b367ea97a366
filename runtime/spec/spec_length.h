// Speculation length chosen per sequence and round (`--k auto`): the k in 0..K that maximises the
// expected tokens per second of the round, from what this run has measured so far.
//
// Model. Sequence b drafts k_b tokens; with per-position acceptance rates a_1..a_K (the chance
// that draft position j is accepted once positions 1..j-1 were), the round emits
//     E_b(k) = 1 + sum_{i=1..k} prod_{j<=i} a_j          (the correction/bonus token included)
// tokens for it. The round costs
//     draft(N) + verify(B + N)        N = sum_b k_b drafted tokens, B + N verified rows,
// where both costs are fitted online from this run's own rounds (CostLine): verify(R) a line in
// the rows of the forward (the whole round but the drafter, so the verifier and the bookkeeping
// count too), draft(N) a line in the drafted tokens for N > 0 plus a separate mean for N = 0
// (a drafter call has a fixed part that a round without drafts does not pay; on drafter ranks the
// leader's wait for the answer has one even then). k = 0 is a plain decode step: one row, no
// draft, so the chooser never plans a round slower than autoregressive decoding by its model.
//
// Chooser. The marginal gain of sequence b's i-th draft token, g_b(i) = prod_{j<=i} a_{b,j}, falls
// with i (every a_j <= 1) and every drafted token costs the same, so for a given total N the best
// split takes the N largest gains. choose_lengths() evaluates every N in 0..sum K_b and keeps the
// best rate (B + G(N)) / (draft(N) + verify(B + N)); ties go to the smaller N.
//
// Estimates. Acceptance per sequence, draft class and draft position: successes / trials of that
// position (a round that offered K' tokens and accepted k is a trial at positions
// 1..min(k + 1, K'), a success at 1..k), with old rounds decaying (half-life kHalfLife rounds).
// The class is the longest draft the sequence could take this round (its limit): for a lookup
// drafter, which is asked for the whole range first, that is the length it offered, and how far
// a lookup reaches is its own evidence (the suffix drafter stops where its match gets thin: on
// the copy-heavy prompts of perf/workloads at k = 8, position 1 of its offers of 4 was accepted
// 0.28-0.47 of the time, of its offers of 8 0.50-0.73; perf/tools/lookup_acceptance.py). Each
// estimate is pulled toward a prior of kPriorTrials pseudo-trials at the same class's rates
// pooled over every sequence, and those toward the run's pooled geometric rate
// (runtime/saguaro's FanOutEstimator, the same estimate the geometric fan-out plans with). Per
// position, because acceptance is not geometric: a lookup draft is either a copy of the text,
// accepted far, or wrong from its first token (on those prompts position 1 was accepted
// 0.36-0.60 of the time, each later one mostly 0.6-0.9 of the times its predecessor was).
//
// Hindsight. A lookup draft's tokens past the chosen k are never verified, so the positions past
// k would get no trials, and a length once chosen short would stay short. For such drafts the
// loop reports the whole offer instead (observe_hindsight): it keeps the untruncated chain and
// counts, as the text is emitted, how many of its tokens the output repeated (draft_hindsight.h).
// A one-hot draft token is accepted with probability p(token), and the target emits it with the
// same probability, so for greedy and for sampling alike this is the acceptance the whole offer
// would have had; it costs no verification.
//
// Costs: CostLine keeps the last kWindow times per x; their medians, made non-decreasing in x,
// are joined piecewise linearly, and a least-squares line through them (each weighted by its
// count) extends the curve past the x observed. The median shrugs off the rounds a loaded machine
// stalls, the window follows a load that changes, and the piecewise curve keeps the step a CPU
// verification takes where its matrix kernels change path (measured on the default model, 2
// threads: 1-3 rows about 2.5-3.3 ms, 4-5 rows about 5.8-6.2 ms; a line through them made
// k = 1..2 look dearer than they are and --k auto decode plainly where drafting paid).
//
// Warm-up and probes. For at least kWarmupRounds rounds, and until the verify curve has two row
// counts (and the draft line a point), the controller takes k = K, 1 and 0 in turn (three row
// counts, each seen three times, so one stalled round does not move the curve). The plain decode
// step is among them because the curve below its lowest row count is extrapolated, and a round
// that follows a drafting round costs more (the drafter's working set pushes some of the target's
// weights out of the cache they share; measured on the default model with the Domino drafter, 2
// threads, chat prompts: a 2-row round in the warm-up 5.4-5.9 ms, 3.9 ms in steady state), so a
// warm-up of K and 1 alone put a decode step at 5.75 ms where it took 2.6-3.1, and --k auto
// drafted where decoding plainly was faster (SD 0.77x AR, 0.87x with the decode step measured).
// The warm-up ends early
// once the measured costs leave no length that pays even for drafts always accepted (a drafter
// whose token costs about a decode step): its K-token rounds would only cost (measured with the
// default model drafting for itself on 2 ranks: each took 80-90 ms against a 9-16 ms
// verification, and held up the next round as long). After that, a sequence
// drafts one token more than its chosen k once every probe_every
// rounds (a probe): without it, a position past the chosen k would never be tried again and a
// row count never re-measured, so the choice could not climb when the text turns predictable
// (measured on the rewrite prompts of perf/workloads with n-gram: stuck at k = 1 while a fixed
// k = 4 ran 1.36x faster), nor leave k = 0. No sequence probes while the costs leave no length
// that pays even for drafts always accepted: a probe could teach it nothing but the draft's cost,
// and a model drafter pays for a probe after n plain steps with a forward over those n tokens (its
// cache catching up): probing every 8 rounds cost the default model drafting for itself about
// 10 ms a probe against 3 ms decode steps, a third of its speed (SD 0.67x AR, 4 chat prompts).
//
// Exactness: the choice depends only on rounds already verified, and any k verifies exactly
// (k = 0 is the plain decode step), so greedy output stays the target's token for token and
// sampled output keeps the target's law.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "runtime/saguaro/fan_out.h"

namespace ssd {

// Expected tokens emitted by a round that drafts k tokens under acceptance rates a[0..k-1]
// (a[j] = the rate of draft position j + 1), bonus included: 1 + sum_i prod_{j<=i} a_j.
double expected_tokens(std::span<const double> a, int32_t k);

// y(x) >= 0 fitted online; x >= 0. x = 0 is kept apart from x > 0 (see the top). For x > 0 the
// per-x medians are made non-decreasing (isotonic regression) and joined piecewise linearly;
// outside the observed x the weighted line's slope carries on from the nearest end.
class CostLine {
 public:
  static constexpr size_t kWindow = 16;  // latest observations kept per x
  void observe(int64_t x, double seconds);
  // Predicted seconds at x: the fitted line for x > 0 (with one x observed, a line through the
  // origin and that point), the x = 0 mean for x = 0 (0 when never observed).
  double predict(int64_t x) const;
  int32_t distinct_positive() const;  // x > 0 values observed
  int64_t observations() const { return n_; }

 private:
  struct Line {
    double icept = 0, slope = 0;
  };
  struct Knot {  // a block of x values sharing one cost after pooling
    double x_lo, x_hi, y, w;
  };
  Line line() const;
  std::vector<Knot> knots() const;

  struct Point {
    std::vector<double> latest;  // ring of the last kWindow times
    size_t next = 0;             // where the next time goes once the ring is full
    double median() const;
  };
  std::map<int64_t, Point> points_;  // x -> its latest times
  int64_t n_ = 0;
};

// The fitted costs of one round.
struct RoundCosts {
  CostLine draft;   // x = tokens drafted in the round (all sequences)
  CostLine verify;  // x = rows verified in the round (all sequences: B + N)
  bool ready() const { return verify.distinct_positive() >= 2 && draft.distinct_positive() >= 1; }
};

// The lengths that maximise the round's expected tokens per second (see the top). accept[b]: the
// rates of sequence b's positions 1..; limit[b]: the most tokens it may draft (<= accept[b].size()).
std::vector<int32_t> choose_lengths(std::span<const std::vector<double>> accept,
                                    std::span<const int32_t> limit, const RoundCosts& costs);

// Per-position acceptance of one sequence (see the top).
class PositionAcceptance {
 public:
  static constexpr double kHalfLife = 32;    // rounds
  static constexpr double kPriorTrials = 4;  // pseudo-trials at the prior rate
  explicit PositionAcceptance(int32_t k_max);
  void observe(int32_t offered, int32_t accepted);
  // [k_max]: the rates of positions 1..k_max, each pulled toward `prior`.
  std::vector<double> rates(double prior) const;
  // The same, position j pulled toward prior[j] ([k_max]).
  std::vector<double> rates(std::span<const double> prior) const;

 private:
  std::vector<double> trials_, successes_;  // [k_max] decayed counts
};

struct SpecLengthOptions {
  int32_t k_max = 8;    // K: the top of the range
  bool automatic = true;  // false: every round drafts k_max (capped by the sequence's limit)
  double prior_accept = 0.6;  // the pooled estimate's prior before any round
  int32_t probe_every = 8;    // rounds between a sequence's probes (one token past its k)
  // A fixed cycle of lengths instead of the policy (tests and studies of length changes): the
  // n-th choice gives every sequence cycle[n % size], capped by its limit. Empty: off.
  std::vector<int32_t> cycle;
};

// The per-run policy: one per generation loop (in-process SD, or the leader of a split run);
// sequences are named by the caller's ids. Also counts the chosen lengths.
class SpecLengthController {
 public:
  explicit SpecLengthController(const SpecLengthOptions& opts);

  // This round's lengths for `seqs` (in order); limit[i] caps sequence i (tokens it has left).
  std::vector<int32_t> choose(std::span<const int32_t> seqs, std::span<const int32_t> limit);
  void observe_draft(int64_t tokens, double seconds);
  void observe_verify(int64_t rows, double seconds);
  // A verified round of `seq`: `offered` tokens verified, `accepted` of them accepted (counted in
  // the class of its last choice).
  void observe_outcome(int32_t seq, int32_t offered, int32_t accepted);
  // A whole offer of `offered` tokens (its class), `accepted` of them repeated by the output
  // (see Hindsight at the top); in place of observe_outcome for that round.
  void observe_hindsight(int32_t seq, int32_t offered, int32_t accepted);
  void finish(int32_t seq);

  const SpecLengthOptions& options() const { return opts_; }
  const RoundCosts& costs() const { return costs_; }
  double pooled_accept() const { return pooled_.a_p(); }
  // The fitted costs and the pooled acceptance, one line ("verify 9.1 ms + 0.80 ms/row, ...").
  std::string describe() const;
  // [k_max + 1]: how many sequence-rounds chose each k.
  const std::vector<int64_t>& histogram() const { return hist_; }

 private:
  struct Seq {
    std::map<int32_t, PositionAcceptance> accept;  // class -> its rates
    int32_t last_class = -1;                       // of the last choice (-1: none yet, k_max)
    int32_t since_probe = 0;                       // rounds since its last probe
  };
  Seq& seq(int32_t id);
  // The costs measured so far make every length lose to a plain decode step even for drafts that
  // are always accepted (and some sequence could draft): the warm-up's K-token rounds end early,
  // and no sequence probes.
  bool drafting_cannot_pay(std::span<const int32_t> cap) const;
  PositionAcceptance& of_class(std::map<int32_t, PositionAcceptance>& m, int32_t cls);
  void observe_class(int32_t id, int32_t cls, int32_t offered, int32_t accepted);
  std::vector<double> rates(int32_t id, int32_t cls);

  SpecLengthOptions opts_;
  RoundCosts costs_;
  FanOutEstimator pooled_;
  std::map<int32_t, PositionAcceptance> pooled_class_;  // class -> rates over every sequence
  std::map<int32_t, Seq> seqs_;
  std::vector<int64_t> hist_;
  int64_t warmup_rounds_ = 0;
  int64_t choices_ = 0;  // choose() calls (the cycle's position)
  static constexpr int64_t kWarmupRounds = 9;
};

}  // namespace ssd
