#include "actors/transport/emulated_link.h"

#include <fmt/format.h>

#include <cmath>

#include "runtime/core/error.h"

namespace ssd {

LinkEmulation parse_link_emulation(const std::string& text) {
  LinkEmulation l;
  const size_t comma = text.find(',');
  auto number = [&](const std::string& s, const char* what) {
    size_t used = 0;
    double v = 0;
    try {
      v = std::stod(s, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    SSD_CHECK(used == s.size() && !s.empty() && std::isfinite(v) && v >= 0,
              "--link-emulate '{}': {} '{}' is not a non-negative number (expected "
              "LATENCY_US[,GBPS], e.g. 500 or 500,10)",
              text, what, s);
    return v;
  };
  l.latency_us = number(text.substr(0, comma), "the latency in microseconds");
  if (comma != std::string::npos) {
    l.gbps = number(text.substr(comma + 1), "the bandwidth in GB/s");
    SSD_CHECK(l.gbps > 0, "--link-emulate '{}': a bandwidth of 0 GB/s never delivers", text);
  }
  return l;
}

EmulatedLink::EmulatedLink(std::unique_ptr<Transport> inner, int tp, LinkEmulation link)
    : inner_(std::move(inner)),
      tp_(tp),
      link_(link),
      wire_free_(static_cast<size_t>(inner_->size()), Clock::time_point{}) {
  sender_ = std::thread([this] { run(); });
}

EmulatedLink::~EmulatedLink() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  sender_.join();
}

bool EmulatedLink::emulated(int peer) const { return (rank() < tp_) != (peer < tp_); }

void EmulatedLink::send_frame(int peer, std::vector<std::byte> frame) {
  check_peer(*this, peer);
  if (!emulated(peer)) return inner_->send_frame(peer, std::move(frame));
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (error_) std::rethrow_exception(error_);
  }
  const auto now = Clock::now();
  const double wire_s = link_.gbps > 0 ? static_cast<double>(frame.size()) / (link_.gbps * 1e9) : 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Clock::time_point& free = wire_free_[static_cast<size_t>(peer)];
    const Clock::time_point start = std::max(now, free);
    free = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(wire_s));
    const Clock::time_point release =
        free + std::chrono::duration_cast<Clock::duration>(
                   std::chrono::duration<double, std::micro>(link_.latency_us));
    held_.push(Held{release, next_order_++, peer, std::move(frame)});
  }
  cv_.notify_all();
}

size_t EmulatedLink::pending_sends() {
  size_t held;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (error_) std::rethrow_exception(error_);
    held = held_.size() + in_flight_;
  }
  return held + inner_->pending_sends();
}

void EmulatedLink::run() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    if (held_.empty()) {
      if (stopping_) return;
      cv_.wait(lock);
      continue;
    }
    // At shutdown the held frames go at once (in order): the job is ending.
    if (!stopping_ && Clock::now() < held_.top().release) {
      cv_.wait_until(lock, held_.top().release);
      continue;
    }
    Held h = std::move(const_cast<Held&>(held_.top()));
    held_.pop();
    ++in_flight_;
    lock.unlock();
    try {
      inner_->send_frame(h.peer, std::move(h.frame));
    } catch (...) {
      lock.lock();
      --in_flight_;
      if (!error_) error_ = std::current_exception();
      continue;
    }
    lock.lock();
    --in_flight_;
  }
}

}  // namespace ssd
