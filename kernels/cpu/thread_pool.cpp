// Persistent worker pool. A parallel_for publishes the job under the mutex, bumps a generation
// counter and wakes the workers; chunk i of n_threads goes to worker i (chunk 0 to the caller),
// so the split is static and deterministic: the same row always lands on the same thread, which
// keeps per-thread partial results reproducible. The caller waits on a second condition variable
// until every worker has finished, so fn (and everything it references) outlives the job.
//
// A parallel_for issued from inside a job (nested) or while another thread's job is running
// would deadlock on a pool this simple; the nested case runs inline instead (detected with a
// thread-local flag). Concurrent calls from different outside threads are not supported.
#include "kernels/cpu/thread_pool.h"

#include "runtime/core/error.h"

namespace ssd::kernels {
namespace {

thread_local bool t_in_job = false;

// [begin, end) of chunk i when n items are split into k near-equal contiguous chunks.
int64_t chunk_begin(int64_t n, int k, int i) { return n * i / k; }

struct InJob {
  InJob() { t_in_job = true; }
  ~InJob() { t_in_job = false; }
};

}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads) {
  SSD_CHECK(n_threads >= 1, "thread pool size must be >= 1, got {}", n_threads);
  threads_.reserve(static_cast<size_t>(n_threads - 1));
  for (int i = 1; i < n_threads; ++i) threads_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_work_.notify_all();
  for (auto& t : threads_) t.join();
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t, int)>& fn) {
  if (n <= 0) return;
  if (n_threads_ == 1 || n == 1 || t_in_job) {
    fn(0, n, 0);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = &fn;
    job_n_ = n;
    pending_ = n_threads_ - 1;
    error_ = nullptr;
    ++generation_;
  }
  cv_work_.notify_all();

  std::exception_ptr mine;
  try {
    InJob in_job;
    const int64_t end = chunk_begin(n, n_threads_, 1);
    if (end > 0) fn(0, end, 0);
  } catch (...) {
    mine = std::current_exception();
  }

  std::exception_ptr theirs;
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_done_.wait(lock, [this] { return pending_ == 0; });
    job_ = nullptr;
    theirs = error_;
    error_ = nullptr;
  }
  if (mine) std::rethrow_exception(mine);
  if (theirs) std::rethrow_exception(theirs);
}

void ThreadPool::worker(int index) {
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(int64_t, int64_t, int)>* job;
    int64_t n;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_work_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      job = job_;
      n = job_n_;
    }
    std::exception_ptr err;
    const int64_t begin = chunk_begin(n, n_threads_, index);
    const int64_t end = chunk_begin(n, n_threads_, index + 1);
    if (begin < end) {
      try {
        InJob in_job;
        (*job)(begin, end, index);
      } catch (...) {
        err = std::current_exception();
      }
    }
    bool last;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (err && !error_) error_ = err;
      last = --pending_ == 0;
    }
    if (last) cv_done_.notify_one();
  }
}

}  // namespace ssd::kernels
