// Residual bookkeeping for verification; see residual.h for the representation and the
// zero-mass argument. The token -> entry index is sized to the largest id seen and only the
// entries of the current p are ever set, so reusing one Residual per thread keeps the per-node
// cost at O(|p|) for reset and O(|q|) per rejection, never O(vocab) for a sparse p.
#include "runtime/spec/residual.h"

#include <algorithm>
#include <cmath>

#include "runtime/core/error.h"

namespace ssd {

void Residual::clear_index() {
  for (const int32_t id : ids_) entry_[id] = -1;
  ids_.clear();
  mass_.clear();
}

void Residual::reset(const ProcessedDist& p) {
  clear_index();
  SSD_CHECK(!p.tokens.empty(), "verify: the target distribution is empty");
  int32_t max_id = -1;
  for (const TokenProb& t : p.tokens) {
    SSD_CHECK(t.id >= 0, "verify: target distribution holds token id {}", t.id);
    max_id = std::max(max_id, t.id);
  }
  if (entry_.size() <= static_cast<size_t>(max_id))
    entry_.resize(static_cast<size_t>(max_id) + 1, -1);

  double sum = 0;
  ids_.reserve(p.tokens.size());
  mass_.reserve(p.tokens.size());
  for (const TokenProb& t : p.tokens) {
    if (entry_[t.id] >= 0) {
      const int32_t dup = t.id;
      clear_index();
      fail(fmt::format("verify: target distribution lists token {} twice", dup));
    }
    entry_[t.id] = static_cast<int32_t>(ids_.size());
    ids_.push_back(t.id);
    mass_.push_back(t.prob);
    sum += t.prob;
  }
  if (!(std::abs(sum - 1) <= kSumTolerance)) {
    clear_index();
    fail(fmt::format("verify: target distribution sums to {}, not 1 (tolerance {})", sum,
                     kSumTolerance));
  }
  z_ = 1;
}

bool Residual::reject(const ProcessedDist& q) {
  undo_.clear();
  double removed = 0;
  for (const TokenProb& t : q.tokens) {
    const int32_t e = t.id >= 0 && static_cast<size_t>(t.id) < entry_.size() ? entry_[t.id] : -1;
    if (e < 0) continue;  // off p's support: no mass to remove
    const double old = mass_[e];
    const double now = std::max(0.0, old - z_ * t.prob);
    if (now == old) continue;
    undo_.emplace_back(e, old);
    mass_[e] = now;
    removed += old - now;
  }
  double z = z_ - removed;
  if (!(z > 1e-3 * z_)) {  // cancellation: sum what is left instead
    z = 0;
    for (const double m : mass_) z += m;
  }
  if (!(z > kZeroMass * z_)) {  // r == q to rounding: keep r (see residual.h)
    for (const auto& [e, old] : undo_) mass_[e] = old;
    return false;
  }
  z_ = z;
  return true;
}

int32_t Residual::sample(double u) const {
  SSD_CHECK(u >= 0 && u < 1, "verify: u must be in [0, 1) (got {})", u);
  const double target = u * z_;
  double run = 0;
  size_t last = mass_.size();
  for (size_t i = 0; i < mass_.size(); ++i) {
    if (mass_[i] <= 0) continue;
    run += mass_[i];
    last = i;
    if (target < run) return ids_[i];
  }
  // z_ is the total only up to rounding: a draw past the running sum goes to the last entry
  // with mass. Some entry has mass, since z_ > 0 and reject() never empties the residual.
  SSD_ASSERT(last < mass_.size());
  return ids_[last];
}

}  // namespace ssd
