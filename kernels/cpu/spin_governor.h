// When the thread pool may spin: a small state machine fed with the pool's hand-offs, kept apart
// from the pool so that its decisions can be tested with made-up times and no threads.
//
// Spinning wins when every pool thread has a core (a job starts within a microsecond, no system
// call), and loses badly when the machine is oversubscribed: a spinning thread is descheduled
// anyway and then loses the scheduler's wake-up preference a sleeping one gets, so each hand-off
// can wait for a time slice (measured on the shared 2-core VM at load 8: 7-10 tok/s spinning
// against 100+ sleeping). So contention must be noticed quickly and acted on firmly, but a
// transient signal must not cost the run.
//
// The pool reports late hand-offs: a thread that lost its core while spinning, or picked a job
// up long after it was published. `late_threshold` of them within `window_ns` mean contention,
// and the pool sleeps instead of spinning ("calm") for a while. The calm starts short
// (calm_min_ns: a vCPU taken away for a moment, a burst of other work, costs milliseconds), and
// grows `growth` times, up to calm_max_ns, only while contention is found again soon (within
// calm_reset_ns) after each calm ends; after a contention-free spell that long, the next calm is
// short again. Each calm's end is a spinning probe (no reports arrive during calm: the pool does
// not spin then); within recheck_ns of a calm's end, `recheck_threshold` late hand-offs are
// enough, since spinning on a busy machine costs a time slice per hand-off (the probe must be
// short), while the rare late hand-off of a quiet machine seldom falls in that short span. So a
// transient costs milliseconds, and persistent oversubscription converges within a few probes
// to long calms and rare, cheap probes. A lone late report changes nothing.
//
// Late hand-offs are counted once per bucket_ns (1 ms) of time: what signals contention is how
// much of the time the pool's threads lose their cores, not how many hand-offs one lost
// millisecond delays (a decode step makes hundreds). Counted by event, another process's short
// burst every 100 ms (a periodic job using 3% of a core) produced dozens of late hand-offs each
// time, grew the calm to its maximum and left the pool sleeping most of the run: 2-thread decode
// runs at 135 tok/s among runs at 300-330 (shared 2-core VM). Counted by millisecond, such a burst
// is 3-4 late milliseconds, below the threshold, while a thread sharing its core with another
// runnable one is late in about half of them. A report carries the time it lost, so a hand-off
// that waited a whole time slice counts every millisecond of it: when two spinning pools share
// the cores, hand-offs become so slow that counting them alone took seconds to notice. The thresholds ask for a fifth of the milliseconds
// of a window (or 4 of the 10 after a calm): a machine whose other work takes a few percent of a
// core, in many short pieces (processes capped by a CPU quota), stays below them.
//
// Thread-safe: reports from several threads are counted with relaxed atomics (a heuristic; any
// interleaving gives a sensible state).
#pragma once

#include <atomic>
#include <cstdint>

namespace ssd::kernels {

class SpinGovernor {
 public:
  struct Params {
    int late_threshold = 20;              // late milliseconds (see bucket_ns) ...
    int64_t window_ns = 100'000'000;      // ... within 100 ms mean contention
    int recheck_threshold = 4;            // ... or this many ...
    int64_t recheck_ns = 10'000'000;      // ... within 10 ms of a calm's end
    int64_t calm_min_ns = 2'000'000;      // first calm: 2 ms
    int64_t calm_max_ns = 1'024'000'000;  // longest calm: ~1 s (2 ms x 4^4 x 2)
    int growth = 4;                       // calm x growth while contention persists
    int64_t calm_reset_ns = 250'000'000;  // a contention-free spell this long resets the calm
    int64_t bucket_ns = 1'000'000;        // late hand-offs within one such span count once
  };
  SpinGovernor() : SpinGovernor(Params{}) {}
  explicit SpinGovernor(const Params& p);

  // A late hand-off (the reporting thread was spinning) at steady-clock time now_ns, which lost
  // the reporting thread lost_ns (the gap it found, or how late it picked the job up): every
  // millisecond of [now_ns - lost_ns, now_ns] counts as late.
  void late(int64_t now_ns, int64_t lost_ns = 0);
  // False while calm: threads should sleep instead of spinning.
  bool may_spin(int64_t now_ns) const {
    return now_ns >= calm_until_ns_.load(std::memory_order_relaxed);
  }

  int64_t calm_until_ns() const { return calm_until_ns_.load(std::memory_order_relaxed); }
  int64_t last_calm_ns() const { return calm_ns_.load(std::memory_order_relaxed); }
  int64_t calms() const { return calms_.load(std::memory_order_relaxed); }

 private:
  void calm(int64_t now_ns);

  Params p_;
  std::atomic<int64_t> window_start_ns_{INT64_MIN / 2};
  std::atomic<int> late_in_window_{0};
  std::atomic<int64_t> last_bucket_{INT64_MIN};  // bucket of the last late hand-off counted
  std::atomic<int64_t> calm_until_ns_{0};
  std::atomic<int64_t> calm_ns_{0};  // length of the last calm (0: none yet)
  std::atomic<int64_t> calms_{0};
};

}  // namespace ssd::kernels
