// A deadline on what a rank is doing, so that a rank that hangs (or waits on a peer that hangs)
// ends the job instead of keeping it alive forever.
//
// The rank arms the watchdog with a phase and a deadline ("verifying round 12", 30 s) and disarms
// or re-arms it as it moves on; deadlines per phase come from the run's flags. If a deadline
// passes while its phase is still armed, the watchdog's own thread (it must not depend on the
// rank's threads, which may be the ones stuck, e.g. inside a blocking collective) calls the abort
// callback with
//   "rank R (role) timed out after S s while <phase>"
// The default callback is abort_job(): that line on stderr and MPI_Abort with a non-zero code,
// which makes mpirun end every rank (no orphans). Tests inject a callback that records instead.
// A rank that dies outright (crash, kill, exit without MPI_Finalize) needs no watchdog: mpirun
// ends the job by itself (see tests/mpi/fault_test.cpp for what it was seen to do).
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "actors/transport/protocol.h"

namespace ssd {

class Watchdog {
 public:
  using AbortFn = std::function<void(const std::string& message)>;
  inline static constexpr int kExitCode = 70;  // the MPI_Abort code of the default callback

  // abort: called on the watchdog's thread when a deadline passes (default: abort_job). It fires
  // once per Watchdog: after that, fired() stays true and later deadlines are not watched.
  Watchdog(int rank, Role role, AbortFn abort = {});
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // Replaces the abort callback (a drafter rank under --on-drafter-loss continue exits alone
  // instead of ending the job).
  void set_abort(AbortFn abort);

  // Starts (or replaces) the current phase; it must end within `seconds` (<= 0: no deadline).
  void arm(std::string phase, double seconds);
  void disarm();
  bool fired() const;
  std::string phase() const;  // current phase ("" when disarmed)

  // Arms a phase for a scope and, when the scope ends, restores the phase that was armed before
  // it, with that phase's original deadline.
  class Scope {
   public:
    Scope(Watchdog& dog, std::string phase, double seconds);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    Watchdog& dog_;
    std::string prev_phase_;
    double prev_seconds_ = 0;
    std::chrono::steady_clock::time_point prev_deadline_;
    bool prev_armed_ = false;
  };

 private:
  using Clock = std::chrono::steady_clock;
  void watch();

  int rank_;
  Role role_;
  AbortFn abort_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  bool armed_ = false;
  bool fired_ = false;
  bool quit_ = false;
  std::string phase_;
  double seconds_ = 0;
  Clock::time_point deadline_;
  std::thread thread_;  // last: started once every field above is set
};

}  // namespace ssd
