// The target leader's sign of life for the drafter lead. A leader that hangs between two of its
// own watched steps (SIGSTOP, a stuck thread outside any watchdog phase: before a prefill, after
// sending an outcome) would leave every other rank waiting forever, since TP workers and drafter
// ranks wait for the leader's next call without a deadline (it may legitimately be busy with
// other work: its drafter, a request's prefill, an idle server). So while a LeaderJob with
// drafter ranks lives, a thread of its own sends the drafter lead a Heartbeat every period
// (a quarter of the step deadline), and the drafter lead's LeaderWatch fails the job when no
// heartbeat was read for two step deadlines (the lead reads them on its loop thread, which one
// answer, a step watched on its own, can hold for up to a step):
//   "rank 2 (drafter) timed out after S s while waiting for a heartbeat from the target leader
//    (rank 0)"
// A stopped or dead process sends nothing, whatever its threads were doing. Heartbeats travel
// outside the traced timeline (TracingTransport passes them through uncounted).
//
// The other way: a leader that takes pushed pre-speculation (StartSeqs::push) can go round after
// round without waiting for the drafter (pushed hits, and misses it drafts itself under --miss-at
// leader), so a hung drafter lead would never miss a deadline there. From such a StartSeqs on, the
// drafter lead sends the leader heartbeats the same way (a quarter of the step deadline), and the
// leader, which reads every frame that arrived once per round, fails or loses the drafter
// (drafter_loss.h) when DrafterSilence has seen nothing of it for two step deadlines:
//   "rank 0 (target) timed out after S s while waiting for a heartbeat from the drafter (rank 1)"
#pragma once

#include <optional>

#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include "actors/transport/transport.h"
#include "actors/transport/watchdog.h"

namespace ssd {

class HeartbeatSender {
 public:
  // Starts sending to `peer` over `world` (thread-safe) every period_s seconds.
  HeartbeatSender(Transport& world, int peer, double period_s);
  ~HeartbeatSender();  // stop()
  HeartbeatSender(const HeartbeatSender&) = delete;
  HeartbeatSender& operator=(const HeartbeatSender&) = delete;
  void stop();  // returns once no heartbeat is being sent (idempotent)

 private:
  void run();
  Transport& world_;
  int peer_;
  double period_s_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;  // last: started once the fields above are set
};

// The drafter lead's side: arms its own watchdog at each heartbeat (the first one starts it).
class LeaderWatch {
 public:
  LeaderWatch(int rank, Role role, int leader, double deadline_s);
  void beat();  // a heartbeat arrived
  void stop();  // the job is ending: no more heartbeats are due

 private:
  Watchdog dog_;
  int leader_;
  double deadline_s_;
};

// The target leader's side of the drafter lead's heartbeats: when it last heard from the lead
// (any frame counts), and whether that is longer ago than the deadline. Times are the caller's
// (monotonic seconds), so the rule is tested without a clock.
class DrafterSilence {
 public:
  explicit DrafterSilence(double deadline_s) : deadline_s_(deadline_s) {}
  void expect(double now) { last_ = now; }  // heartbeats are due from now on (a push batch)
  void heard(double now) {
    if (last_) last_ = now;
  }
  void forget() { last_.reset(); }  // none are due (a batch without pushes)
  // Seconds since the lead was last heard from, when past the deadline.
  std::optional<double> overdue(double now) const {
    if (!last_ || now - *last_ <= deadline_s_) return std::nullopt;
    return now - *last_;
  }
  double deadline_s() const { return deadline_s_; }

 private:
  double deadline_s_;
  std::optional<double> last_;  // unset: nothing is due
};

}  // namespace ssd
