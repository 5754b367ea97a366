// Per-phase deadline of a rank (see watchdog.h).
#include "actors/transport/watchdog.h"

#include <fmt/format.h>

#include "actors/transport/mpi_world.h"

namespace ssd {

Watchdog::Watchdog(int rank, Role role, AbortFn abort)
    : rank_(rank), role_(role), abort_(std::move(abort)) {
  if (!abort_) abort_ = [](const std::string& message) { abort_job(kExitCode, message); };
  thread_ = std::thread([this] { watch(); });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard lock(mutex_);
    quit_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void Watchdog::set_abort(AbortFn abort) {
  std::lock_guard lock(mutex_);
  abort_ = std::move(abort);
}

void Watchdog::arm(std::string phase, double seconds) {
  {
    std::lock_guard lock(mutex_);
    phase_ = std::move(phase);
    seconds_ = seconds;
    armed_ = seconds > 0;
    if (armed_)
      deadline_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                     std::chrono::duration<double>(seconds));
  }
  cv_.notify_all();
}

void Watchdog::disarm() {
  {
    std::lock_guard lock(mutex_);
    armed_ = false;
    phase_.clear();
  }
  cv_.notify_all();
}

bool Watchdog::fired() const {
  std::lock_guard lock(mutex_);
  return fired_;
}

std::string Watchdog::phase() const {
  std::lock_guard lock(mutex_);
  return phase_;
}

void Watchdog::watch() {
  std::unique_lock lock(mutex_);
  while (!quit_) {
    if (!armed_ || fired_) {
      cv_.wait(lock);
      continue;
    }
    const Clock::time_point deadline = deadline_;
    if (cv_.wait_until(lock, deadline) == std::cv_status::no_timeout) continue;  // re-read
    if (quit_ || !armed_ || deadline_ != deadline || Clock::now() < deadline_) continue;
    fired_ = true;
    const std::string message =
        fmt::format("rank {} ({}) timed out after {:g} s while {}", rank_, role_name(role_),
                    seconds_, phase_);
    const AbortFn abort = abort_;
    lock.unlock();  // the callback may take time (or never return: MPI_Abort)
    abort(message);
    lock.lock();
  }
}

Watchdog::Scope::Scope(Watchdog& dog, std::string phase, double seconds) : dog_(dog) {
  {
    std::lock_guard lock(dog.mutex_);
    prev_phase_ = dog.phase_;
    prev_seconds_ = dog.seconds_;
    prev_deadline_ = dog.deadline_;
    prev_armed_ = dog.armed_;
  }
  dog.arm(std::move(phase), seconds);
}

Watchdog::Scope::~Scope() {
  {
    std::lock_guard lock(dog_.mutex_);
    dog_.phase_ = prev_phase_;
    dog_.seconds_ = prev_seconds_;
    dog_.deadline_ = prev_deadline_;
    dog_.armed_ = prev_armed_;
  }
  dog_.cv_.notify_all();
}

}  // namespace ssd
