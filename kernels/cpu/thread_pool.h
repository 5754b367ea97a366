// A persistent pool of worker threads for the kernels: threads are created once, and each
// parallel_for hands out contiguous chunks of [0, n) to the workers and the calling thread, then
// waits for all of them. No thread is created per op. A pool of size 1 runs inline.
//
// The hand-off is built for ~200 calls per decoded token: a call publishes the job by bumping an
// atomic generation counter that idle workers spin on (a few hundred nanoseconds from publish to
// start), and a worker that has seen no job for `spin_us` microseconds goes to sleep on a futex
// so that an idle rank does not burn its cores. The caller likewise spins, then sleeps, while the
// last worker finishes. When the machine is oversubscribed (a spinning thread loses its core)
// the pool stops spinning for a few milliseconds, longer only while that persists
// (spin_governor.h). Workers are pinned to CPUs only when asked
// (Options::pin_cpus; topology/ decides which cores a rank owns).
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <memory>
#include <thread>
#include <type_traits>
#include <vector>

#include "kernels/cpu/spin_governor.h"

namespace ssd::kernels {

// A non-owning reference to a callable fn(begin, end, thread_index): no allocation per call
// (std::function would allocate for most capturing lambdas). Valid while the callable lives.
class ChunkFnRef {
 public:
  template <class F, class = std::enable_if_t<!std::is_same_v<std::decay_t<F>, ChunkFnRef>>>
  ChunkFnRef(F&& f)  // NOLINT: implicit on purpose, parallel_for takes lambdas directly
      : obj_(const_cast<void*>(static_cast<const void*>(std::addressof(f)))),
        call_([](void* o, int64_t b, int64_t e, int t) {
          (*static_cast<std::remove_reference_t<F>*>(o))(b, e, t);
        }) {}
  void operator()(int64_t b, int64_t e, int t) const { call_(obj_, b, e, t); }

 private:
  void* obj_;
  void (*call_)(void*, int64_t, int64_t, int);
};

class ThreadPool {
 public:
  struct Options {
    int threads = 1;            // >= 1, the calling thread counts as one
    std::vector<int> pin_cpus;  // empty: no pinning; else worker i runs on pin_cpus[i % size]
    int spin_us = 200;          // how long an idle thread spins before it sleeps (0: never)
  };
  explicit ThreadPool(int n_threads);
  explicit ThreadPool(const Options& opts);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }
  // How many times the pool stopped spinning for a while (contention), so far.
  int64_t calms() const { return governor_.calms(); }
  const std::vector<int>& pinned_cpus() const { return pin_cpus_; }

  // Calls fn(begin, end, thread_index) on disjoint chunks covering [0, n); returns when all are
  // done. The split is static: chunk i of size() near-equal contiguous chunks goes to thread i
  // (0 = the caller), so a given index always lands on the same thread. Exceptions thrown by fn
  // are captured and the one of the lowest thread index is rethrown on the calling thread.
  // A call made from inside a job (nested), or while another thread's call is running on this
  // pool, runs inline on the calling thread.
  void parallel_for(int64_t n, ChunkFnRef fn);

  // Like parallel_for, but the threads claim chunks of `grain` items from a shared counter until
  // [0, n) is used up, so a thread that is slowed down (a busy core, a longer task) does less of
  // the work instead of making the others wait. Which thread runs which chunk varies from call to
  // call: use it only where the result of a chunk does not depend on the thread.
  void parallel_for_dynamic(int64_t n, int64_t grain, ChunkFnRef fn);

  // [begin, end) of chunk i when n items are split into k near-equal contiguous chunks.
  static int64_t chunk_begin(int64_t n, int k, int i) { return n * i / k; }

 private:
  void worker(int index);
  void wait_for_workers();
  int spin_budget_us() const;  // spin_us, or 0 while the governor says calm

  int n_threads_ = 1;
  int spin_us_ = 200;
  std::vector<int> pin_cpus_;
  std::vector<std::thread> threads_;
  std::vector<std::exception_ptr> errors_;  // [n_threads], slot per thread, read after the job

  // The published job (written before generation_ is bumped, read after it is seen).
  const ChunkFnRef* job_ = nullptr;
  int64_t job_n_ = 0;

  // Each on its own cache line: workers poll generation_, the caller polls pending_.
  alignas(64) std::atomic<uint32_t> generation_{0};
  alignas(64) std::atomic<uint32_t> pending_{0};
  alignas(64) std::atomic<int> sleeping_workers_{0};
  std::atomic<bool> caller_sleeping_{false};
  std::atomic<int64_t> publish_ns_{0};  // steady_clock time the current job was published
  SpinGovernor governor_;                // when spinning is worth it (contention)
  std::atomic<bool> stop_{false};
  std::atomic<bool> busy_{false};
};

}  // namespace ssd::kernels
