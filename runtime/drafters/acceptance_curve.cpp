#include "runtime/drafters/acceptance_curve.h"

#include <fmt/format.h>

#include <algorithm>

#include "runtime/core/error.h"

namespace ssd {

AcceptanceWindow acceptance_over(const std::vector<RoundRecord>& rounds, int64_t begin,
                                 int64_t end) {
  const int64_t n = static_cast<int64_t>(rounds.size());
  begin = std::clamp<int64_t>(begin, 0, n);
  end = std::clamp<int64_t>(end, begin, n);
  AcceptanceWindow w;
  w.first_round = begin;
  w.rounds = end - begin;
  for (int64_t i = begin; i < end; ++i) {
    w.drafted += rounds[i].drafted;
    w.accepted += rounds[i].accepted;
  }
  return w;
}

std::vector<AcceptanceWindow> acceptance_windows(const std::vector<RoundRecord>& rounds,
                                                 int64_t window) {
  SSD_CHECK(window >= 1, "acceptance window {} must be >= 1 round", window);
  std::vector<AcceptanceWindow> out;
  for (int64_t b = 0; b < static_cast<int64_t>(rounds.size()); b += window)
    out.push_back(acceptance_over(rounds, b, b + window));
  return out;
}

std::string format_acceptance_curve(const std::vector<AcceptanceWindow>& windows) {
  std::string s;
  for (const AcceptanceWindow& w : windows)
    s += fmt::format("rounds {}-{}: accept {:.3f}, mean length {:.2f}\n", w.first_round,
                     w.first_round + w.rounds - 1, w.rate(), w.mean_acceptance_length());
  return s;
}

}  // namespace ssd
