// Which rank does what, decided once at start-up from (world size, this rank, TP degree) and
// passed down: ranks 0..tp-1 are the target's tensor-parallel group (rank 0 leads it and owns the
// requests), ranks tp..world-1 are drafter ranks (rank tp leads them). A single process is
// world = 1, tp = 1 with no drafter rank. Nothing here needs MPI, so it is built and tested alone.
#pragma once

#include <string>
#include <vector>

#include "actors/transport/protocol.h"

namespace ssd {

struct RankLayout {
  int world = 1;
  int rank = 0;
  int tp = 1;

  // Validated: world >= 1, 0 <= rank < world, 1 <= tp <= world. Throws ssd::Error naming the
  // value and the launch that would fix it.
  static RankLayout make(int world, int rank, int tp);

  int n_drafters() const { return world - tp; }
  Role role_of(int r) const { return r < tp ? Role::kTarget : Role::kDrafter; }
  Role role() const { return role_of(rank); }
  bool is_target() const { return rank < tp; }
  bool is_target_leader() const { return rank == 0; }
  int target_leader() const { return 0; }
  int drafter_lead() const { return n_drafters() > 0 ? tp : -1; }  // -1: no drafter rank
  bool is_drafter_lead() const { return rank == drafter_lead(); }
  int tp_rank() const { return is_target() ? rank : -1; }          // rank inside the TP group
  int drafter_index() const { return is_target() ? -1 : rank - tp; }  // 0 = drafter lead
  std::vector<int> target_ranks() const;
  std::vector<int> drafter_ranks() const;

  // "rank 3 (drafter 1 of 2)" / "rank 0 (target leader, TP 1 of 2)".
  std::string describe(int r) const;
  std::string describe() const { return describe(rank); }
  // "4 ranks: target TP=2 on ranks 0-1, 2 drafter ranks 2-3".
  std::string summary() const;
};

}  // namespace ssd
