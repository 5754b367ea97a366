// Throughput of the CPU kernels, printed, never asserted (a timing assertion on a shared machine
// is a flaky test). Disabled by default; run with
//   ssd_test_kernels --gtest_also_run_disabled_tests --gtest_filter='KernelBench.*'
// Reports GB/s of weight bytes for a 576 x 1536 matrix (rows x cols, the shape of SmolLM2's
// ffn_down) single-threaded, per ISA, and the per-call overhead of ThreadPool::parallel_for.
#include <gtest/gtest.h>
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <random>

#include "kernel_test_util.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/thread_pool.h"

namespace ssd::kernels {
namespace {

double now(clockid_t clock) {
  timespec ts;
  clock_gettime(clock, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Best-of-3 seconds per call of fn, each trial repeating fn for at least ~50 ms of `clock`. The
// single-thread kernels are timed in thread CPU time, which time slices lost to other processes
// on a shared machine do not inflate; the thread pool in wall time, which is what it costs.
template <class F>
double seconds_per_call(clockid_t clock, F&& fn) {
  double best = 1e30;
  for (int trial = 0; trial < 3; ++trial) {
    int64_t iters = 0;
    const double t0 = now(clock);
    double el = 0;
    do {
      fn();
      ++iters;
      el = now(clock) - t0;
    } while (el < 0.05);
    best = std::min(best, el / static_cast<double>(iters));
  }
  return best;
}

TEST(KernelBench, DISABLED_Throughput) {
  test::IsaGuard guard;
  std::mt19937 rng(1);
  const int64_t rows = 576, cols = 1536;
  const auto x = test::random_floats(cols * 4, rng);  // [4, cols]
  std::vector<float> y(rows * 4);
  for (DType t : test::kAllTypes) {
    const uint64_t rb = dtype_row_bytes(t, cols);
    std::vector<uint8_t> w(rb * rows);
    for (int64_t r = 0; r < rows; ++r) {
      const auto row = test::random_row(t, cols, rng);
      std::copy(row.begin(), row.end(), w.begin() + r * rb);
    }
    const WeightMatrix m{t, w.data(), rows, cols, rb};
    const double gb = static_cast<double>(w.size()) * 1e-9;
    for (Isa isa : test::runnable_isas()) {
      force_isa(isa);
      const double s_dot = seconds_per_call(CLOCK_THREAD_CPUTIME_ID, [&] {
        for (int64_t r = 0; r < rows; ++r) y[r] = dot_row(t, w.data() + r * rb, x.data(), cols);
      });
      const double s_mm1 = seconds_per_call(CLOCK_THREAD_CPUTIME_ID,
                                            [&] { matmul(m, x.data(), y.data(), 1, nullptr); });
      const double s_mm4 = seconds_per_call(CLOCK_THREAD_CPUTIME_ID,
                                            [&] { matmul(m, x.data(), y.data(), 4, nullptr); });
      std::printf(
          "%-5s %-7s dot_row %6.2f GB/s  matmul n=1 %6.2f GB/s (%6.1f us)  n=4 %6.2f GB/s "
          "(%6.1f us, %5.1f us/token)\n",
          std::string(dtype_name(t)).c_str(), isa_name(isa), gb / s_dot, gb / s_mm1, s_mm1 * 1e6,
          gb / s_mm4, s_mm4 * 1e6, s_mm4 * 1e6 / 4);
    }
  }
}

TEST(KernelBench, DISABLED_ThreadPoolOverhead) {
  for (int size : {1, 2, 3}) {
    ThreadPool pool(size);
    const double s = seconds_per_call(CLOCK_MONOTONIC, [&] {
      pool.parallel_for(64, [](int64_t, int64_t, int) {});  // pure handoff cost
    });
    std::printf("ThreadPool(%d) parallel_for, empty body: %.2f us per call\n", size, s * 1e6);
  }
}

}  // namespace
}  // namespace ssd::kernels
