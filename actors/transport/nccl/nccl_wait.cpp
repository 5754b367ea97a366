// Deadline-bounded polling of NCCL work (see nccl_wait.h).
#include "actors/transport/nccl/nccl_wait.h"

#include <fmt/format.h>

#include <algorithm>
#include <thread>

#include "runtime/core/error.h"

namespace ssd {

std::string wait_failure_message(const WaitSubject& s, const WaitStatus& last, double waited_s) {
  const std::string who =
      s.peer >= 0 ? fmt::format("with rank {}", s.peer) : std::string("(all ranks of the group)");
  if (last.state == WaitState::kError)
    return fmt::format("rank {}: NCCL error on {} {} while waiting for {} after {:.3f} s: {}",
                       s.rank, s.comm, who, s.waiting_for, waited_s, last.error);
  return fmt::format("rank {}: NCCL timed out on {} {} after {:.3f} s waiting for {} (the peer "
                     "is stuck, dead or never posted the matching operation)",
                     s.rank, s.comm, who, waited_s, s.waiting_for);
}

void wait_until_done(const WaitStatusFn& status, std::chrono::milliseconds timeout,
                     const WaitSubject& subject, const WaitFailFn& fail,
                     std::chrono::microseconds max_sleep) {
  const auto start = std::chrono::steady_clock::now();
  // start + milliseconds::max() would overflow into the past: no deadline is the clock's end.
  const auto deadline = timeout == kNoDeadline ? std::chrono::steady_clock::time_point::max()
                                               : start + timeout;
  std::chrono::microseconds sleep(0);
  for (;;) {
    const WaitStatus st = status();
    if (st.state == WaitState::kDone) return;
    const auto now = std::chrono::steady_clock::now();
    if (st.state == WaitState::kError || now >= deadline) {
      const double waited = std::chrono::duration<double>(now - start).count();
      const std::string message = wait_failure_message(subject, st, waited);
      if (fail) fail(message);
      ::ssd::fail(message);
    }
    if (sleep.count() == 0) {
      std::this_thread::yield();
      sleep = std::chrono::microseconds(1);
    } else {
      std::this_thread::sleep_for(std::min<std::chrono::nanoseconds>(sleep, deadline - now));
      sleep = std::min(sleep * 2, max_sleep);
    }
  }
}

}  // namespace ssd
