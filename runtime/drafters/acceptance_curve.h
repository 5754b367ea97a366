// How acceptance evolves over a run: one record per verification round, summarised per window of
// rounds. An online-learning drafter is judged by this curve, not by a run's mean (the DVI issue
// asks to "report how acceptance changes over a long run").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ssd {

struct RoundRecord {
  int32_t drafted = 0;   // draft tokens offered (tree nodes)
  int32_t accepted = 0;  // draft tokens accepted
};

struct AcceptanceWindow {
  int64_t first_round = 0;  // index of the window's first round
  int64_t rounds = 0;
  int64_t drafted = 0;
  int64_t accepted = 0;
  double rate() const { return drafted == 0 ? 0.0 : static_cast<double>(accepted) / drafted; }
  // Tokens emitted per target forward, bonus included (as SdStats::mean_acceptance_length).
  double mean_acceptance_length() const {
    return rounds == 0 ? 0.0 : 1.0 + static_cast<double>(accepted) / rounds;
  }
};

// Consecutive windows of `window` rounds (the last one may be shorter). window >= 1.
std::vector<AcceptanceWindow> acceptance_windows(const std::vector<RoundRecord>& rounds,
                                                 int64_t window);
// The rounds [begin, end) as one window.
AcceptanceWindow acceptance_over(const std::vector<RoundRecord>& rounds, int64_t begin, int64_t end);
// One line per window: "rounds 0-19: accept 0.41, mean length 2.20".
std::string format_acceptance_curve(const std::vector<AcceptanceWindow>& windows);

}  // namespace ssd
