#include "topology/sim/branch_plan.h"

#include <algorithm>

#include "runtime/core/error.h"

namespace ssd::sim {

std::vector<PlannedBranch> plan_branches(const std::vector<std::vector<int32_t>>& fan_out,
                                         const AcceptanceParams& acc) {
  struct Keyed {
    PlannedBranch b;
    int64_t within = 0;  // the branch's index within its sequence (round-robin tie order)
  };
  std::vector<Keyed> all;
  for (size_t s = 0; s < fan_out.size(); ++s) {
    if (fan_out[s].empty()) continue;  // a decode step: nothing is pre-speculated after it
    const int32_t k = static_cast<int32_t>(fan_out[s].size()) - 1;
    const std::vector<double> pk = acc.outcome_probs(k);
    int64_t within = 0;
    for (int32_t kk = 0; kk <= k; ++kk)
      for (int32_t j = 0; j < fan_out[s][kk]; ++j) {
        const double pj = acc.miss_rate(j) - acc.miss_rate(j + 1);  // P(rank = j)
        all.push_back({{static_cast<int32_t>(s), kk, j, pk[kk] * pj}, within++});
      }
  }
  std::stable_sort(all.begin(), all.end(), [](const Keyed& x, const Keyed& y) {
    if (x.b.weight != y.b.weight) return x.b.weight > y.b.weight;
    if (x.within != y.within) return x.within < y.within;
    return x.b.seq < y.b.seq;
  });
  std::vector<PlannedBranch> out;
  out.reserve(all.size());
  for (const Keyed& k : all) out.push_back(k.b);
  return out;
}

DraftProgress run_prespeculation(
    const std::vector<PlannedBranch>& plan, const std::vector<RankJob>& ranks, int32_t chunk,
    const std::function<double(const std::vector<int64_t>&)>& chunk_cost) {
  SSD_CHECK(!ranks.empty(), "pre-speculation needs at least one drafter rank");
  SSD_CHECK(chunk >= 0, "pre-speculation chunk must be >= 0 (got {})", chunk);
  const size_t d = ranks.size();
  DraftProgress p;
  p.drafted.assign(plan.size(), false);
  p.drafted_s.assign(plan.size(), 0);
  p.end_s.assign(d, 0);
  p.done.assign(d, 0);
  p.busy_s.assign(d, 0);
  for (size_t r = 0; r < d; ++r) {
    std::vector<int64_t> mine;
    for (size_t i = r; i < plan.size(); i += d) mine.push_back(static_cast<int64_t>(i));
    const size_t step = chunk > 0 ? static_cast<size_t>(chunk) : std::max<size_t>(1, mine.size());
    double t = ranks[r].start_s;
    for (size_t at = 0; at < mine.size();) {
      if (at > 0 && t >= ranks[r].cut_s) break;  // the outcome is here: stop at this boundary
      size_t n = std::min(step, mine.size() - at);
      if (ranks[r].fit) n = static_cast<size_t>(std::max<int64_t>(0, ranks[r].fit(t, n)));
      if (n == 0) break;  // not one branch fits before the outcome
      const std::vector<int64_t> part(
          mine.begin() + static_cast<std::ptrdiff_t>(at),
          mine.begin() + static_cast<std::ptrdiff_t>(std::min(mine.size(), at + n)));
      const double dt = chunk_cost(part);
      p.chunks.push_back({static_cast<int32_t>(r), t, dt, static_cast<int64_t>(part.size())});
      t += dt;
      p.busy_s[r] += dt;
      p.done[r] += static_cast<int64_t>(part.size());
      for (int64_t i : part) {
        p.drafted[static_cast<size_t>(i)] = true;
        p.drafted_s[static_cast<size_t>(i)] = t;
      }
      at += part.size();
    }
    p.end_s[r] = t;
  }
  return p;
}

}  // namespace ssd::sim
