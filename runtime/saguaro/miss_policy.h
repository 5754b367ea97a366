// Miss policy ("Speculative Speculative Decoding"): when the verification outcome of a sequence was
// not pre-speculated, its next speculation comes either from the primary drafter, drafting now (a
// synchronous draft, as in SD: the whole batch waits for it), or from the backup speculator (n-gram
// lookup: answers at once but is accepted less). Which is better depends on the batch size b,
// through a critical batch size b*: primary for b <= b*, backup above.
//
// Derivation. Per round at batch b, with
//   T_v(b)  the round's time outside drafting: the target's verification plus the round's fixed
//           costs T_o (the round trip of outcome and answer, the host work on both sides, a wait
//           for a pre-speculation chunk), which either fallback pays alike,
//   T_d(m)  the primary's draft time for m sequences, modelled linear: T_d(m) = d0 + d1 m,
//   L_p     the mean acceptance length (tokens per round, bonus included) of primary speculations
//           (cache hits and primary fallbacks alike), L_b that of backup speculations,
//   h       the cache hit rate per sequence, sequences missing independently (M ~ Bin(b, 1 - h)),
// and a backup that costs nothing:
//   primary fallback: tokens b L_p; time T_v(b) + E[T_d(M); M > 0]
//                                       = T_v(b) + d0 (1 - h^b) + d1 b (1 - h)  =: T_v(b) + D(b)
//   backup fallback:  tokens b (h L_p + (1 - h) L_b); time T_v(b)
// Primary wins when its tokens per second are higher:
//   L_p / (T_v + D) > (h L_p + (1 - h) L_b) / T_v
//   <=>  (1 - h) (L_p - L_b) T_v(b)  >  (h L_p + (1 - h) L_b) D(b).
// D(b) grows with b (more rounds have a miss, more sequences to draft) while the left side grows
// only as T_v does, so the inequality holds up to some b and then fails: b* is the largest b such
// that it holds at every b' <= b (scanned from 1 up to b_max). Corner cases: h = 1 (no misses:
// the choice never matters) gives b_max; L_p <= L_b gives 0 (the backup always).
//
// Measurements (MissPolicy): T_d from the primary fallback drafts and the verification from what
// the caller reports (observe_verify), each a least-squares line in b; T_o as the median of the
// last kOverheadWindow rounds' overheads the caller measured (observe_round_overhead: on the
// drafter lead, the time between two outcomes' arrivals less the verification between them and
// the fallback draft that answered the first; drafter_actor.h); L_p, L_b and h from the rounds.
// Leaving T_o out (as before it was measured) undercounts what a round costs whichever fallback
// answers, so the backup's saving D(b) looks larger than it is and the backup is chosen at batch
// sizes where it loses, the more so the larger T_o's share of a round (a fast verification, a
// far drafter). Until T_d and T_v have min_samples measurements each, b* is b_star_default;
// until the backup has answered, L_b is accept_backup_default. b_star >= 0 overrides everything.
//
// The backup's acceptance L_b is measured even while the backup is not used (observe_shadow): the
// caller drafts the backup beside a primary fallback (cheap: a lookup) and scores it against the
// verified outcome, so a policy that turned to the primary keeps measuring the backup, and one
// that never used the backup does not judge it by accept_backup_default.
//
// Optionally never worse than SD (backup_must_not_be_worse, `--miss-policy not-worse`). A miss
// answered by the primary is what SD's round would have drafted for the same outcome; a backup
// speculation accepted less makes the round emit fewer tokens. Before T_o was measured this guard
// stood in for it (measured on two ranks with Domino: SSD with backup fallbacks at a mean
// acceptance length of 1.19 against SD's 1.67, and slower); it stays an option. With it the backup
// answers a miss only when it is both faster (batch past b*) and not worse: its measured
// acceptance length, over at least min_samples rounds, at least the primary's. Without it (the
// default, the paper's batch-aware fallback) the derivation alone decides: at large batch on a
// GPU the cheap backup is what keeps SSD ahead of SD.
#pragma once

#include <cstdint>
#include <deque>
#include <string>

#include "runtime/saguaro/speculation.h"

namespace ssd {

enum class Fallback { kPrimary, kBackup };

// How a miss would be answered now, as the target leader needs to know it (--miss-at leader): by
// a lookup drafter, which the leader can run itself on the tokens it holds (the primary when the
// primary is a lookup, the backup when the policy chooses it), or kNone: by drafting on the
// drafter rank (a model primary), so the leader waits for the answer. The drafter decides it with
// its policy (SsdDrafterCore::miss_lookup) and tells the leader, which follows.
enum class MissLookup : uint8_t { kNone, kPrimary, kBackup };

struct MissCosts {
  double draft_s0 = 0, draft_s1 = 0;    // T_d(m) = draft_s0 + draft_s1 m   (seconds)
  double verify_s0 = 0, verify_s1 = 0;  // the verification: verify_s0 + verify_s1 b (seconds)
  double round_s = 0;                   // T_o; T_v(b) = verify_s0 + verify_s1 b + round_s
  double accept_primary = 1;            // L_p
  double accept_backup = 1;             // L_b
  double hit_rate = 0;                  // h
};

// b* of the derivation above for batches 1..b_max.
int32_t critical_batch_size(const MissCosts& c, int32_t b_max);

struct MissPolicyOptions {
  int32_t b_star = -1;                 // >= 0: fixed b* (override); -1: derived
  int32_t b_star_default = 4;          // b* before any draft or verify time was measured
  int32_t b_max = 1024;                // largest batch the derivation scans
  double accept_backup_default = 1.0;  // L_b before the backup has answered (only the bonus)
  int32_t min_samples = 3;             // measurements of T_d and of T_v before deriving
  bool backup_must_not_be_worse = false;  // the backup only when accepted at least as well
};

// `--miss-policy`, shared by the runtime (`ssd generate/bench/serve`) and the simulator
// (`ssd simulate`): auto derives b* (primary at batch <= b*, backup above); not-worse adds the
// guard above; primary / backup answer every miss so.
enum class MissChoice { kAuto, kNotWorse, kPrimary, kBackup };
// "auto", "not-worse", "primary", "backup"; ssd::Error naming the choices otherwise.
MissChoice parse_miss_choice(const std::string& s);
const char* miss_choice_name(MissChoice c);
// The options of `choice`; b_star >= 0 fixes auto's or not-worse's b* (an Error for primary or
// backup, which fix it themselves).
MissPolicyOptions miss_policy_options(MissChoice choice, int32_t b_star = -1);

// A least-squares line y = a + s x over observations, with running sums.
class LineFit {
 public:
  void add(double x, double y);
  int64_t count() const { return n_; }
  // (intercept, slope); one distinct x gives (mean y, 0). Predictions are clamped at >= 0.
  double intercept() const;
  double slope() const;
  double at(double x) const;

 private:
  int64_t n_ = 0;
  double sx_ = 0, sy_ = 0, sxx_ = 0, sxy_ = 0;
};

class MissPolicy {
 public:
  explicit MissPolicy(const MissPolicyOptions& opts);

  void observe_primary_draft(int32_t batch, double seconds);
  void observe_verify(int32_t batch, double seconds);
  // One round's fixed cost outside verification and drafting (T_o above; negative: ignored).
  void observe_round_overhead(double seconds);
  static constexpr size_t kOverheadWindow = 31;  // rounds T_o is the median of
  // A verified speculation from `source` that accepted `accepted` tokens.
  void observe_round(SpecSource source, int32_t accepted);
  void observe_lookup(bool hit);
  // A backup speculation drafted beside a primary fallback and scored against the outcome: it
  // would have had `accepted` tokens accepted (a lower bound when it matched every emitted one).
  void observe_shadow(int32_t accepted);
  // The backup's measured acceptance (real and shadow rounds, >= min_samples) is at least the
  // primary's.
  bool backup_not_worse() const;

  MissCosts costs() const;
  int32_t critical_batch() const;  // the override, the derived b*, or the default
  bool derived() const;            // critical_batch() comes from measurements
  Fallback choose(int32_t batch) const {
    if (batch <= critical_batch()) return Fallback::kPrimary;
    if (opts_.b_star >= 0 || !opts_.backup_must_not_be_worse) return Fallback::kBackup;
    return backup_not_worse() ? Fallback::kBackup : Fallback::kPrimary;
  }
  const MissPolicyOptions& options() const { return opts_; }

 private:
  MissPolicyOptions opts_;
  LineFit draft_, verify_;
  std::deque<double> overheads_;  // the latest kOverheadWindow rounds' T_o
  int64_t rounds_primary_ = 0, accepted_primary_ = 0;
  int64_t rounds_backup_ = 0, accepted_backup_ = 0;
  int64_t lookups_ = 0, hits_ = 0;
};

}  // namespace ssd
