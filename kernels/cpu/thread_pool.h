// A persistent pool of worker threads for the kernels: threads are created once, and each
// parallel_for hands out contiguous chunks of [0, n) to the workers and the calling thread, then
// waits for all of them. No thread is created per op. A pool of size 1 runs inline.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace ssd::kernels {

class ThreadPool {
 public:
  explicit ThreadPool(int n_threads);  // n_threads >= 1, the caller counts as one
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }
  // Calls fn(begin, end, thread_index) on disjoint chunks covering [0, n); returns when all are
  // done. Exceptions thrown by fn are captured and the first is rethrown on the calling thread.
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t, int)>& fn);

 private:
  void worker(int index);
  int n_threads_;
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable cv_work_, cv_done_;
  const std::function<void(int64_t, int64_t, int)>* job_ = nullptr;
  int64_t job_n_ = 0;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
};

}  // namespace ssd::kernels
