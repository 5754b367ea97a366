// A group's agreement on one small integer: every rank proposes a value, every rank gets the
// smallest. Used where the ranks of a tensor-parallel group must take the same decision that
// each would otherwise take alone, e.g. whether a forward with NCCL collectives inside replays
// as a CUDA graph (a captured collective must be captured on every rank; Backend::
// begin_replayable with a ReplayKey::group). One allgatherv of one float per rank.
#pragma once

#include <algorithm>
#include <vector>

#include "runtime/parallel/collective.h"

namespace ssd {

// Collective. value must be exactly representable as a float (|value| < 2^24).
inline int agree_min(Collective& comm, int value) {
  const int t = comm.size();
  if (t <= 1) return value;
  const std::vector<int64_t> counts(static_cast<size_t>(t), 1);
  std::vector<float> all(static_cast<size_t>(t));
  const float mine = static_cast<float>(value);
  comm.allgatherv(&mine, counts.data(), all.data());
  return static_cast<int>(*std::min_element(all.begin(), all.end()));
}

}  // namespace ssd
