// Persistent worker pool with a spin-then-sleep hand-off.
//
// Publish: the caller stores the job, then bumps generation_ (seq_cst). A worker that is spinning
// sees the new value within a few hundred nanoseconds; one that went to sleep is woken with a
// futex wake, which the caller issues only when sleeping_workers_ says someone sleeps. The two
// sides form a Dekker pair (worker: sleeping_workers_++ then re-read generation_; caller:
// generation_++ then read sleeping_workers_; all seq_cst), so a wake-up cannot be lost.
// Completion mirrors it with pending_ and caller_sleeping_.
//
// Every worker takes part in every job (a worker whose chunk is empty still counts down
// pending_), so no worker can still be reading job_ when the next job is published.
//
// Spinning is bounded by spin_us and uses the pause instruction, then sleeps. On an
// oversubscribed machine (more runnable threads than cores: tests running in parallel, ranks
// sharing cores) a spinning thread is descheduled anyway and loses the scheduler's wake-up
// preference that a sleeping one gets. So every hand-off a thread spun for is reported to the
// SpinGovernor when it was late: the thread found a gap of more than kContendedNs between two of
// its ~1 us spin rounds (it lost its core), or picked a job up more than kLatePickupNs after its
// publish time (it was not running). Eight late hand-offs within 100 ms make the pool sleep-only
// (pure futex hand-offs, which beat spinning when cores are short) for 2 ms, doubling up to ~1 s
// only while contention is found again right after each calm; then it spins again. A lone late
// event (an interrupt, a virtual machine's vCPU taken away for a moment) changes nothing, and a
// short burst of them costs milliseconds, not the run. (The pool it replaces went sleep-only for
// a whole second on 8 late events in 100 ms, re-armed by the next 8: on a shared VM a decode run
// could spend most of its time in futex hand-offs, tens of thousands of context switches a
// second, at half speed.)
// Measured on the 2-vCPU development VM (empty parallel_for, 2 threads): 0.4-0.5 us idle (the
// mutex/condition-variable pool it replaced: 2.4-9 us, the upper figure when the vCPU halts
// between jobs); two such processes on the 2 cores: 2.1 us (the old pool: 2.4 us).
#include "kernels/cpu/thread_pool.h"

#include <algorithm>
#include <chrono>

#if defined(__linux__)
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "runtime/core/error.h"

namespace ssd::kernels {
namespace {

thread_local bool t_in_job = false;

constexpr int64_t kContendedNs = 50000;    // a spin round this long: the thread lost its core
constexpr int64_t kLatePickupNs = 5000;    // a spinning worker with its own core sees a job
                                           // within ~0.3 us; later, it was not running

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

struct InJob {
  bool saved = t_in_job;
  InJob() { t_in_job = true; }
  ~InJob() { t_in_job = saved; }
};

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}

// Spins (pause) until done() or spin_us have passed; returns done()'s last value. A round of
// 16 pauses takes about a microsecond; one that took more than kContendedNs means this thread
// lost its core meanwhile: the gap is added to `lost_ns`. (No sched_yield: on a virtual machine
// it returns slowly even when idle, and a spinning thread that is in the way is preempted by the
// scheduler anyway, which the late reports then show.)
template <class Done>
bool spin_until(Done done, int spin_us, int64_t& lost_ns) {
  if (done()) return true;
  if (spin_us <= 0) return false;
  const int64_t deadline = now_ns() + 1000 * int64_t{spin_us};
  int64_t last = now_ns();
  for (;;) {
    for (int i = 0; i < 16; ++i) {
      if (done()) return true;
      cpu_relax();
    }
    const int64_t now = now_ns();
    if (now - last > kContendedNs) lost_ns += now - last;
    last = now;
    if (now >= deadline) return done();
  }
}

// Sleep while *a == expected / wake the sleepers of a. On Linux straight futex calls (the
// libstdc++ std::atomic::wait spins and yields a dozen times first, which costs a loaded
// machine more than it saves); elsewhere std::atomic's wait / notify.
void futex_wait(std::atomic<uint32_t>& a, uint32_t expected) {
#if defined(__linux__)
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&a), FUTEX_WAIT_PRIVATE, expected, nullptr,
          nullptr, 0);
#else
  a.wait(expected, std::memory_order_seq_cst);
#endif
}

void futex_wake(std::atomic<uint32_t>& a, bool all) {
#if defined(__linux__)
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&a), FUTEX_WAKE_PRIVATE, all ? INT32_MAX : 1,
          nullptr, nullptr, 0);
#else
  if (all)
    a.notify_all();
  else
    a.notify_one();
#endif
}

void pin_current_thread(int cpu) {
#if defined(__linux__)
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof(set), &set);  // best effort: a hint, not a rule
#else
  (void)cpu;
#endif
}

}  // namespace

ThreadPool::ThreadPool(int n_threads) : ThreadPool(Options{.threads = n_threads}) {}

ThreadPool::ThreadPool(const Options& opts)
    : n_threads_(opts.threads), spin_us_(opts.spin_us), pin_cpus_(opts.pin_cpus) {
  SSD_CHECK(opts.threads >= 1, "thread pool size must be >= 1, got {}", opts.threads);
  SSD_CHECK(opts.spin_us >= 0, "thread pool spin time must be >= 0 us, got {}", opts.spin_us);
  for (int cpu : pin_cpus_)
    SSD_CHECK(cpu >= 0 && cpu < 4096, "thread pool: cannot pin to CPU {}", cpu);
  errors_.resize(static_cast<size_t>(n_threads_));
  threads_.reserve(static_cast<size_t>(n_threads_ - 1));
  for (int i = 1; i < n_threads_; ++i) threads_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true, std::memory_order_seq_cst);
  generation_.fetch_add(1, std::memory_order_seq_cst);
  futex_wake(generation_, true);
  for (auto& t : threads_) t.join();
}

void ThreadPool::parallel_for(int64_t n, ChunkFnRef fn) {
  if (n <= 0) return;
  if (n_threads_ == 1 || n == 1 || t_in_job || busy_.exchange(true, std::memory_order_acquire)) {
    InJob in_job;  // a nested call from inside fn runs inline too
    fn(0, n, 0);
    return;
  }
  job_ = &fn;
  job_n_ = n;
  publish_ns_.store(now_ns(), std::memory_order_relaxed);
  pending_.store(static_cast<uint32_t>(n_threads_ - 1), std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_seq_cst);  // publishes job_, job_n_, pending_
  if (sleeping_workers_.load(std::memory_order_seq_cst) > 0) futex_wake(generation_, true);

  try {
    InJob in_job;
    const int64_t end = chunk_begin(n, n_threads_, 1);
    if (end > 0) fn(0, end, 0);
  } catch (...) {
    errors_[0] = std::current_exception();
  }
  wait_for_workers();
  job_ = nullptr;

  std::exception_ptr first;
  for (auto& e : errors_) {
    if (e && !first) first = e;
    e = nullptr;
  }
  busy_.store(false, std::memory_order_release);
  if (first) std::rethrow_exception(first);
}

void ThreadPool::parallel_for_dynamic(int64_t n, int64_t grain, ChunkFnRef fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  if (n_threads_ == 1 || n <= grain) {
    parallel_for(1, [&](int64_t, int64_t, int tid) { fn(0, n, tid); });
    return;
  }
  alignas(64) std::atomic<int64_t> next{0};
  auto claim = [&](int64_t, int64_t, int tid) {
    for (;;) {
      const int64_t b = next.fetch_add(grain, std::memory_order_relaxed);
      if (b >= n) return;
      fn(b, std::min(n, b + grain), tid);
    }
  };
  parallel_for(n_threads_, claim);
}

void ThreadPool::wait_for_workers() {
  auto done = [this] { return pending_.load(std::memory_order_acquire) == 0; };
  int64_t lost = 0;
  const int budget = spin_budget_us();
  const bool finished = spin_until(done, budget, lost);
  if (lost > 0) governor_.late(now_ns(), lost);
  if (finished) return;
  for (;;) {
    caller_sleeping_.store(true, std::memory_order_seq_cst);
    const uint32_t left = pending_.load(std::memory_order_seq_cst);
    if (left == 0) break;
    futex_wait(pending_, left);
  }
  caller_sleeping_.store(false, std::memory_order_relaxed);
  (void)pending_.load(std::memory_order_acquire);  // pairs with the workers' release
}

int ThreadPool::spin_budget_us() const {
  if (spin_us_ == 0) return 0;
  return governor_.may_spin(now_ns()) ? spin_us_ : 0;
}

void ThreadPool::worker(int index) {
  if (!pin_cpus_.empty())
    pin_current_thread(pin_cpus_[static_cast<size_t>(index) % pin_cpus_.size()]);
  uint32_t seen = 0;
  for (;;) {
    auto fresh = [&] { return generation_.load(std::memory_order_acquire) != seen; };
    int64_t lost = 0;
    const int budget = spin_budget_us();
    const bool got = spin_until(fresh, budget, lost);
    if (budget > 0) {  // late reports come from spinning threads only (none while calm)
      const int64_t now = now_ns();
      const int64_t pickup = got ? now - publish_ns_.load(std::memory_order_relaxed) : 0;
      if (lost > 0 || pickup > kLatePickupNs) governor_.late(now, std::max(lost, pickup));
    }
    if (!got) {
      for (;;) {
        sleeping_workers_.fetch_add(1, std::memory_order_seq_cst);
        const uint32_t g = generation_.load(std::memory_order_seq_cst);
        if (g == seen) futex_wait(generation_, seen);
        sleeping_workers_.fetch_sub(1, std::memory_order_seq_cst);
        if (fresh()) break;
      }
    }
    seen = generation_.load(std::memory_order_acquire);
    if (stop_.load(std::memory_order_acquire)) return;

    const int64_t n = job_n_;
    const int64_t begin = chunk_begin(n, n_threads_, index);
    const int64_t end = chunk_begin(n, n_threads_, index + 1);
    if (begin < end) {
      try {
        InJob in_job;
        (*job_)(begin, end, index);
      } catch (...) {
        errors_[static_cast<size_t>(index)] = std::current_exception();
      }
    }
    if (pending_.fetch_sub(1, std::memory_order_seq_cst) == 1 &&
        caller_sleeping_.load(std::memory_order_seq_cst))
      futex_wake(pending_, false);
  }
}

}  // namespace ssd::kernels
