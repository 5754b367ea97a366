#include "runtime/saguaro/prespec_switch.h"

#include <algorithm>
#include <vector>

#include "runtime/core/error.h"
#include "runtime/core/median.h"

namespace ssd {

PrespecSwitch::PrespecSwitch(const PrespecSwitchOptions& opts) : opts_(opts) {
  SSD_CHECK(opts.block >= 1, "pre-speculation switch: block of {} rounds must be >= 1",
            opts.block);
  SSD_CHECK(opts.explore_every >= 2, "pre-speculation switch: explore_every {} must be >= 2",
            opts.explore_every);
}

void PrespecSwitch::observe_round(int64_t tokens, double seconds) {
  if (!opts_.adaptive) return;
  tokens_ += std::max<int64_t>(tokens, 0);
  seconds_ += std::max(seconds, 0.0);
  if (++rounds_ >= opts_.block) next_block();
}

double PrespecSwitch::rate(bool on) const {
  const std::deque<double>& r = rates_[on ? 1 : 0];
  return median(std::vector<double>(r.begin(), r.end()));
}

void PrespecSwitch::next_block() {
  std::deque<double>& r = rates_[on_ ? 1 : 0];
  r.push_back(seconds_ > 0 ? static_cast<double>(tokens_) / seconds_ : 0.0);
  if (r.size() > kKeep) r.pop_front();
  ++blocks_;
  blocks_on_ += on_ ? 1 : 0;
  rounds_ = 0;
  tokens_ = 0;
  seconds_ = 0;
  if (blocks_ < 2 * kWarmupPairs) {  // on, off, on, off
    on_ = blocks_ % 2 == 0;
    return;
  }
  const bool best = rate(true) >= rate(false);
  const bool explore = (blocks_ - 2 * kWarmupPairs) % opts_.explore_every == opts_.explore_every - 1;
  on_ = explore ? !best : best;
}

}  // namespace ssd
