#include "kernels/cpu/spin_governor.h"

#include <algorithm>

#include "runtime/core/error.h"

namespace ssd::kernels {

SpinGovernor::SpinGovernor(const Params& p) : p_(p) {
  SSD_CHECK(p.late_threshold >= 1 && p.recheck_threshold >= 1 && p.window_ns > 0,
            "spin governor: {} late hand-offs in {} ns is no contention test", p.late_threshold,
            p.window_ns);
  SSD_CHECK(p.calm_min_ns > 0 && p.calm_max_ns >= p.calm_min_ns,
            "spin governor: calm range {}..{} ns is empty", p.calm_min_ns, p.calm_max_ns);
  SSD_CHECK(p.growth >= 1, "spin governor: calm growth {} must be >= 1", p.growth);
  SSD_CHECK(p.bucket_ns > 0 && p.bucket_ns <= p.window_ns,
            "spin governor: bucket of {} ns must be positive and within the {} ns window",
            p.bucket_ns, p.window_ns);
}

void SpinGovernor::late(int64_t now_ns, int64_t lost_ns) {
  // The milliseconds (first, last] not counted yet: after the last one counted, within the loss.
  const int64_t last = now_ns / p_.bucket_ns;
  const int64_t lost = std::clamp<int64_t>(lost_ns, 0, p_.window_ns);
  const int64_t first = (now_ns - lost) / p_.bucket_ns - 1;
  const int64_t counted = last_bucket_.exchange(last, std::memory_order_relaxed);
  const int fresh = static_cast<int>(last - std::max(first, counted));
  if (fresh <= 0) return;
  int n = fresh;
  if (now_ns - window_start_ns_.load(std::memory_order_relaxed) > p_.window_ns) {
    window_start_ns_.store(now_ns - lost, std::memory_order_relaxed);
    late_in_window_.store(fresh, std::memory_order_relaxed);
  } else {
    n = late_in_window_.fetch_add(fresh, std::memory_order_relaxed) + fresh;
  }
  const int64_t last_end = calm_until_ns_.load(std::memory_order_relaxed);
  const bool recheck = calm_ns_.load(std::memory_order_relaxed) > 0 &&
                       now_ns - last_end < p_.recheck_ns;
  if (n < (recheck ? std::min(p_.recheck_threshold, p_.late_threshold) : p_.late_threshold))
    return;
  late_in_window_.store(0, std::memory_order_relaxed);  // the next calm needs fresh evidence
  calm(now_ns);
}

void SpinGovernor::calm(int64_t now_ns) {
  const int64_t last_end = calm_until_ns_.load(std::memory_order_relaxed);
  const int64_t last = calm_ns_.load(std::memory_order_relaxed);
  const bool soon_again = last > 0 && now_ns - last_end < p_.calm_reset_ns;
  const int64_t length = soon_again ? std::min(p_.growth * last, p_.calm_max_ns) : p_.calm_min_ns;
  calm_ns_.store(length, std::memory_order_relaxed);
  calm_until_ns_.store(now_ns + length, std::memory_order_relaxed);
  calms_.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace ssd::kernels
