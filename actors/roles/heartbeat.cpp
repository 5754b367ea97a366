#include "actors/roles/heartbeat.h"

#include <fmt/format.h>

#include <chrono>

namespace ssd {

HeartbeatSender::HeartbeatSender(Transport& world, int peer, double period_s)
    : world_(world), peer_(peer), period_s_(period_s), thread_([this] { run(); }) {}

HeartbeatSender::~HeartbeatSender() { stop(); }

void HeartbeatSender::stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void HeartbeatSender::run() {
  const auto period = std::chrono::duration<double>(period_s_);
  std::unique_lock lock(mu_);
  for (int64_t n = 0; !stop_; ++n) {
    try {
      world_.send(peer_, Heartbeat{world_.rank(), "", n});
    } catch (...) {
      return;  // a failing link is reported by the ranks' own waits, not by this thread
    }
    cv_.wait_for(lock, period, [this] { return stop_; });
  }
}

LeaderWatch::LeaderWatch(int rank, Role role, int leader, double deadline_s)
    : dog_(rank, role), leader_(leader), deadline_s_(deadline_s) {}

void LeaderWatch::beat() {
  dog_.arm(fmt::format("waiting for a heartbeat from the target leader (rank {})", leader_),
           deadline_s_);
}

void LeaderWatch::stop() { dog_.disarm(); }

}  // namespace ssd
