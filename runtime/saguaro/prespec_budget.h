// How much pre-speculation fits before the round's outcome arrives (SSD on its own drafter rank).
//
// A drafter rank drafts one thing at a time: while a chunk of branches is being drafted, an
// outcome that arrives waits for the chunk to end, and on a miss the fallback draft follows. A
// miss then costs the target more than SD's round (outcome -> draft -> answer) by the part of the
// chunk that outlasted verification. To keep a miss no dearer than SD's round, the drafter drafts
// a chunk only if it is expected to end before the outcome arrives:
//
//   window   the time from sending an answer to the next outcome's arrival (the target verifying,
//            plus the link both ways); the kQuantile-th quantile of the latest kWindows windows
//            (a low quantile: a chunk that ends after the outcome costs the target, one that
//            could have been drafted costs only a possible hit);
//   chunk    the seconds of one draft_branches() call of n branches, a least-squares line in n
//            over every call measured (a model drafter's call has a fixed part and a per-branch
//            part; a lookup drafter's is microseconds); a batch's first speculations count as a
//            call of as many branches as sequences they drafted.
//
// branches_within(left, want): the most branches, up to `want`, whose call is predicted to end
// within `left` seconds (0: none fits). With no call measured yet it answers `want` (nothing to
// judge a chunk by). Once a call was measured but no window yet (a job's first round: the
// outcome's time is unknown) it answers 0, so the first verification waits for no chunk: a model
// drafter's chunk there had held the target for many verifications' time, and a lookup's miss
// costs next to nothing. Until kMinSamples calls were measured a call is priced at the dearest
// per-branch cost seen (a first call is a batch's first speculations, one branch per sequence);
// from then on by the line.
#pragma once

#include <cstdint>
#include <deque>

#include "runtime/saguaro/miss_policy.h"

namespace ssd {

class PrespecBudget {
 public:
  static constexpr size_t kWindows = 16;
  static constexpr double kQuantile = 0.25;
  static constexpr int64_t kMinSamples = 3;

  void observe_window(double seconds);
  void observe_call(int32_t branches, double seconds);
  // The line fit prices calls (kMinSamples calls measured) and a window is known.
  bool ready() const;
  // The window the next outcome is expected within (0 before any window was measured).
  double window() const;
  int32_t branches_within(double left, int32_t want) const;

 private:
  std::deque<double> windows_;  // the latest kWindows windows, oldest first
  LineFit call_;                // seconds of a draft_branches() call by its branch count
  double per_branch_ = 0;       // the dearest seconds per branch of any call measured
};

}  // namespace ssd
