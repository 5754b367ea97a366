// The parts of Transport every implementation shares: a blocking receive built on try_recv(),
// the flush with a deadline built on pending_sends(), peer checks, and sequence-number
// bookkeeping.
#include "actors/transport/transport.h"

#include <fmt/format.h>

#include <algorithm>
#include <thread>

namespace ssd {

Envelope Transport::recv(std::chrono::milliseconds timeout) {
  // 200 us between polls at most: an idle wait costs well under 1% of a core, and a message
  // waits at most that long beyond its arrival (a target forward takes milliseconds).
  return poll_until(std::chrono::steady_clock::now() + timeout, std::chrono::microseconds(200));
}

Envelope Transport::poll_until(std::chrono::steady_clock::time_point deadline,
                               std::chrono::microseconds max_sleep) {
  const auto start = std::chrono::steady_clock::now();
  std::chrono::microseconds sleep(0);
  for (;;) {
    if (std::optional<Envelope> env = try_recv()) return std::move(*env);
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline)
      throw_timeout(std::chrono::duration_cast<std::chrono::milliseconds>(now - start));
    if (sleep.count() == 0) {
      std::this_thread::yield();
      sleep = std::chrono::microseconds(1);
    } else {
      std::this_thread::sleep_for(std::min<std::chrono::nanoseconds>(sleep, deadline - now));
      sleep = std::min(sleep * 2, max_sleep);
    }
  }
}

bool Transport::flush(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (pending_sends() == 0) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

void Transport::throw_timeout(std::chrono::milliseconds waited) const {
  throw TransportTimeout(fmt::format("rank {} timed out after {:.3f} s waiting for a message "
                                     "({} transport, {} ranks)",
                                     rank(), waited.count() / 1e3, name(), size()));
}

void SequenceBook::accept(int self, int peer, const WireHeader& h) {
  uint64_t& expect = in_.at(peer);
  SSD_CHECK(h.seq == expect,
            "rank {} got frame number {} ({}) from rank {}, expected number {}: a frame was "
            "lost or reordered",
            self, h.seq, kind_name(static_cast<MsgKind>(h.kind)), peer, expect);
  ++expect;
}

void check_peer(const Transport& t, int peer) {
  SSD_CHECK(peer >= 0 && peer < t.size(), "{} transport: peer rank {} is outside 0..{}", t.name(),
            peer, t.size() - 1);
}

}  // namespace ssd
