// Which branches an SSD drafter pre-speculates, in which order, and which of them it has drafted
// when the round's outcome arrives: the simulator's copy of what runtime/saguaro's
// plan_branches() and the drafter actor's chunked job do (drafter_actor.cpp).
//
// Plan: every sequence gets the geometric fan-out F_0..F_K of its budget (fan_out.h); branch
// (k, j) is "k tokens accepted, bonus = the drafter's j-th choice at position k", j < F_k, with
// weight P(k) x P(rank = j). All branches of all sequences are ordered by weight, descending;
// ties keep a round-robin over the sequences. With D drafter ranks, branch i goes to rank i mod D.
// Each rank drafts its share in chunks of `chunk` branches (0: one call for all); once the outcome
// has reached it (the cut), it stops at the next chunk boundary, the first chunk always drafted.
// A rank with a `fit` (one drafter rank: runtime/saguaro/prespec_budget.h) sizes every call to
// what it expects to end before the outcome arrives, and stops when not one branch fits.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "topology/sim/acceptance_model.h"

namespace ssd::sim {

struct PlannedBranch {
  int32_t seq = 0;  // index into the round's active sequences
  int32_t k = 0;    // accepted tokens of the outcome
  int32_t rank = 0; // the bonus's rank in the drafter's list at position k
  double weight = 0;
};

// `fan_out[s]` is sequence s's plan [K_s + 1]; empty for a sequence whose current speculation is
// a decode step (k = 0: the runtime plans nothing after it).
std::vector<PlannedBranch> plan_branches(const std::vector<std::vector<int32_t>>& fan_out,
                                         const AcceptanceParams& acc);

struct RankJob {
  double start_s = 0;  // when the rank starts drafting
  double cut_s = 0;    // when the outcome (or the lead's cut) reaches it
  // fit(now, want): how many of the next `want` branches to draft in a call starting at `now`
  // (0: stop); null drafts `want` (drafter_actor.cpp's gate, PrespecBudget::branches_within).
  std::function<int64_t(double, int64_t)> fit;
};

struct DraftProgress {
  std::vector<bool> drafted;       // [branches] drafted before the cut
  std::vector<double> drafted_s;   // [branches] when the call that drafted it ended (else 0)
  std::vector<double> end_s;       // [ranks] when each rank's job ended
  std::vector<int64_t> done;       // [ranks] branches each drafted
  std::vector<double> busy_s;      // [ranks] time spent drafting
  struct Chunk { int32_t rank; double start_s, dur_s; int64_t branches; };
  std::vector<Chunk> chunks;       // for the timeline
};

// chunk_cost(rank, branch indices) -> seconds of one draft call over those branches.
DraftProgress run_prespeculation(
    const std::vector<PlannedBranch>& plan, const std::vector<RankJob>& ranks, int32_t chunk,
    const std::function<double(const std::vector<int64_t>&)>& chunk_cost);

}  // namespace ssd::sim
