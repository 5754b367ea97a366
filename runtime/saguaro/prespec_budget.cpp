#include "runtime/saguaro/prespec_budget.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace ssd {

void PrespecBudget::observe_window(double seconds) {
  if (!(seconds >= 0)) return;
  windows_.push_back(seconds);
  if (windows_.size() > kWindows) windows_.pop_front();
}

void PrespecBudget::observe_call(int32_t branches, double seconds) {
  if (!(branches > 0 && seconds >= 0)) return;
  call_.add(branches, seconds);
  per_branch_ = std::max(per_branch_, seconds / branches);
}

bool PrespecBudget::ready() const {
  return !windows_.empty() && call_.count() >= kMinSamples;
}

double PrespecBudget::window() const {
  if (windows_.empty()) return 0;
  std::vector<double> w(windows_.begin(), windows_.end());
  const size_t at = static_cast<size_t>(std::floor(kQuantile * static_cast<double>(w.size() - 1)));
  std::nth_element(w.begin(), w.begin() + static_cast<std::ptrdiff_t>(at), w.end());
  return w[at];
}

int32_t PrespecBudget::branches_within(double left, int32_t want) const {
  if (want <= 0) return 0;
  if (call_.count() == 0) return want;          // nothing to judge a chunk by
  if (windows_.empty() || left <= 0) return 0;  // the outcome's time unknown, or due
  if (call_.count() < kMinSamples) {            // too few calls for a line: the dearest rate
    if (per_branch_ <= 0) return want;
    return static_cast<int32_t>(std::min<double>(want, std::floor(left / per_branch_)));
  }
  if (call_.at(1) > left) return 0;  // not even one branch
  const double a = call_.intercept(), s = call_.slope();
  if (s <= 0) return want;  // the measured calls cost the same whatever their size
  const double n = std::floor((left - a) / s);
  return n >= want ? want : std::max(1, static_cast<int32_t>(n));
}

}  // namespace ssd
