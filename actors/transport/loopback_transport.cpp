// In-process endpoints (see loopback_transport.h).
#include "actors/transport/loopback_transport.h"

namespace ssd {

LoopbackTransport::LoopbackTransport(LoopbackHub& hub, int rank)
    : hub_(hub), rank_(rank), in_book_(hub.size()), out_book_(hub.size()) {}

int LoopbackTransport::size() const { return hub_.size(); }

void LoopbackTransport::send_frame(int peer, std::vector<std::byte> frame) {
  check_peer(*this, peer);
  const WireHeader h = check_frame(frame, rank_);
  LoopbackTransport& to = hub_.endpoint(peer);
  std::lock_guard send_lock(send_mutex_);
  stamp_seq(frame, out_book_.next(peer));
  {
    std::lock_guard box_lock(to.box_mutex_);
    to.box_.push_back(Envelope{rank_, static_cast<MsgKind>(h.kind), std::move(frame)});
  }
  to.box_cv_.notify_all();
}

Envelope LoopbackTransport::accept_locked() {
  Envelope env = std::move(box_.front());
  box_.pop_front();
  in_book_.accept(rank_, env.peer, check_frame(env.bytes, env.peer));
  return env;
}

std::optional<Envelope> LoopbackTransport::try_recv() {
  std::lock_guard lock(box_mutex_);
  if (box_.empty()) return std::nullopt;
  return accept_locked();
}

Envelope LoopbackTransport::recv(std::chrono::milliseconds timeout) {
  const auto start = std::chrono::steady_clock::now();
  std::unique_lock lock(box_mutex_);
  if (!box_cv_.wait_until(lock, start + timeout, [&] { return !box_.empty(); })) {
    lock.unlock();
    throw_timeout(std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::steady_clock::now() - start));
  }
  return accept_locked();
}

LoopbackHub::LoopbackHub(int n) {
  SSD_CHECK(n >= 1, "a loopback hub needs at least 1 endpoint, got {}", n);
  // Endpoints size their books from size(), so the vector is filled before any is constructed.
  endpoints_.resize(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) endpoints_[r] = std::make_unique<LoopbackTransport>(*this, r);
}

LoopbackTransport& LoopbackHub::endpoint(int rank) {
  SSD_CHECK(rank >= 0 && rank < size(), "loopback endpoint {} is outside 0..{}", rank,
            size() - 1);
  return *endpoints_[rank];
}

}  // namespace ssd
