#include "runtime/saguaro/outcome_prediction.h"

#include <algorithm>

namespace ssd {

std::vector<PredictedOutcome> predict_outcomes(std::span<const int32_t> tokens,
                                               std::span<const ProcessedDist> predicted,
                                               std::span<const int32_t> fan_out) {
  std::vector<PredictedOutcome> out;
  const size_t K = tokens.size();
  for (size_t k = 0; k <= K && k < predicted.size() && k < fan_out.size(); ++k) {
    const int32_t want = fan_out[k];
    int32_t got = 0;
    const size_t first = out.size();
    for (const TokenProb& tp : predicted[k].tokens) {
      if (got >= want) break;
      if (k < K && tp.id == tokens[k]) continue;  // a rejected token is never the bonus
      const bool seen = std::any_of(out.begin() + static_cast<std::ptrdiff_t>(first), out.end(),
                                    [&](const PredictedOutcome& o) { return o.bonus == tp.id; });
      if (seen) continue;
      out.push_back(PredictedOutcome{static_cast<int32_t>(k), tp.id, tp.prob});
      ++got;
    }
  }
  return out;
}

}  // namespace ssd
