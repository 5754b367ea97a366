// Rank-to-role mapping (see rank_layout.h).
#include "actors/transport/rank_layout.h"

#include <fmt/format.h>

#include "runtime/core/error.h"

namespace ssd {

RankLayout RankLayout::make(int world, int rank, int tp) {
  SSD_CHECK(world >= 1, "the job has {} ranks; it needs at least 1", world);
  SSD_CHECK(rank >= 0 && rank < world, "rank {} is outside the job's ranks 0..{}", rank,
            world - 1);
  SSD_CHECK(tp >= 1, "--tp {} is invalid: the target needs at least 1 rank", tp);
  SSD_CHECK(tp <= world,
            "--tp {} needs at least {} ranks, the job has {} (start it with mpirun -n {} or more)",
            tp, tp, world, tp);
  return RankLayout{world, rank, tp};
}

std::vector<int> RankLayout::target_ranks() const {
  std::vector<int> r;
  for (int i = 0; i < tp; ++i) r.push_back(i);
  return r;
}

std::vector<int> RankLayout::drafter_ranks() const {
  std::vector<int> r;
  for (int i = tp; i < world; ++i) r.push_back(i);
  return r;
}

std::string RankLayout::describe(int r) const {
  if (r < 0 || r >= world) return fmt::format("rank {} (not in the job)", r);
  if (r < tp)
    return fmt::format("rank {} (target{}, TP {} of {})", r, r == 0 ? " leader" : "", r + 1, tp);
  return fmt::format("rank {} (drafter {} of {})", r, r - tp + 1, n_drafters());
}

std::string RankLayout::summary() const {
  std::string s = fmt::format("{} rank{}: target TP={} on rank{} 0{}", world, world == 1 ? "" : "s",
                              tp, tp == 1 ? "" : "s", tp == 1 ? "" : fmt::format("-{}", tp - 1));
  if (n_drafters() == 0) return s + ", no drafter rank";
  if (n_drafters() == 1) return s + fmt::format(", drafter on rank {}", tp);
  return s + fmt::format(", {} drafter ranks {}-{}", n_drafters(), tp, world - 1);
}

}  // namespace ssd
