// Throughput of the CPU kernels, printed, never asserted (a timing assertion on a shared machine
// is a flaky test). Disabled by default; run with
//   ssd_test_kernels --gtest_also_run_disabled_tests --gtest_filter='KernelBench.*'
//
// KernelBench.Throughput: per ISA, GB/s of weight bytes of dot_row and matmul (float path and
//   integer path, n = 1 and 4) on a 576 x 1536 matrix (SmolLM2's ffn_down), single thread.
// KernelBench.MatmulRoofline: per weight type, single thread, active ISA, on the shapes of
//   SmolLM2-135M's ffn (1536 x 576) and LM head (49152 x 576): GB/s of weight bytes at n = 1 and
//   time(n) / time(1) for n = 2, 4, 8, 16, 64, for the float path (float32 activations, how every
//   type was multiplied before the integer path existed; still the path of F32/F16/BF16 and of
//   unprepared matrices) and the integer path (8-bit activations, packed weights; on an AMX CPU
//   once with AVX-512 alone and once with the AMX tiles that take 10 or more tokens), each
//   "cached" (one matrix called over and over: it stays in L2/L3) and "DRAM" (a ring of copies
//   of >= 256 MB, so every call streams its weights from memory, as a decode does), next to the
//   read bandwidth of one thread measured in the same run.
// KernelBench.ThreadPoolOverhead: per-call cost of ThreadPool::parallel_for.
// KernelBench.AttentionBlock: one attention op of one layer at SmolLM2's shapes (9 query heads,
//   3 KV heads x 64) for a causal block of n rows after P cached positions, single thread,
//   active ISA: row by row (attention_heads per row and KV head, as a decode runs each row) and
//   in one pass (attention_slots per KV head), in us and ns per (visible key, query head).
#include <gtest/gtest.h>
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <random>

#include "kernel_test_util.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/packed_matrix.h"
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

std::vector<uint8_t> random_matrix_bytes(DType t, int64_t rows, int64_t cols, std::mt19937& rng) {
  const uint64_t rb = dtype_row_bytes(t, cols);
  std::vector<uint8_t> w(rb * rows);
  // 64 distinct random rows repeated: the bytes' values do not change the kernels' speed.
  std::vector<std::vector<uint8_t>> pool;
  for (int i = 0; i < 64; ++i) pool.push_back(test::random_row(t, cols, rng));
  for (int64_t r = 0; r < rows; ++r)
    std::copy(pool[r % 64].begin(), pool[r % 64].end(), w.begin() + r * rb);
  return w;
}

TEST(KernelBench, DISABLED_Throughput) {
  test::IsaGuard guard;
  std::mt19937 rng(1);
  const int64_t rows = 576, cols = 1536;
  const auto x = test::random_floats(cols * 4, rng);  // [4, cols]
  std::vector<float> y(rows * 4);
  for (DType t : test::kAllTypes) {
    const uint64_t rb = dtype_row_bytes(t, cols);
    const auto w = random_matrix_bytes(t, rows, cols, rng);
    const WeightMatrix m{t, w.data(), rows, cols, rb};
    const WeightMatrix p = prepare_matmul_weight(m);
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
      std::printf("%-5s %-7s dot_row %6.2f GB/s  float matmul n=1 %6.2f GB/s  n=4 %6.1f us/token",
                  std::string(dtype_name(t)).c_str(), isa_name(isa), gb / s_dot, gb / s_mm1,
                  s_mm4 * 1e6 / 4);
      if (p.packed) {
        const double i1 = seconds_per_call(CLOCK_THREAD_CPUTIME_ID,
                                           [&] { matmul(p, x.data(), y.data(), 1, nullptr); });
        const double i4 = seconds_per_call(CLOCK_THREAD_CPUTIME_ID,
                                           [&] { matmul(p, x.data(), y.data(), 4, nullptr); });
        std::printf("  | integer n=1 %6.2f GB/s  n=4 %6.1f us/token", gb / i1, i4 * 1e6 / 4);
      }
      std::printf("\n");
    }
  }
}

// GB/s of a plain streaming read of `bytes` by one thread (the roofline the kernels are held to).
double read_bandwidth(uint64_t bytes) {
  std::vector<uint64_t> buf(bytes / 8, 1);
  volatile uint64_t sink = 0;
  const double s = seconds_per_call(CLOCK_THREAD_CPUTIME_ID, [&] {
    uint64_t a = 0, b = 0, c = 0, d = 0;
    for (size_t i = 0; i + 4 <= buf.size(); i += 4)
      a += buf[i], b += buf[i + 1], c += buf[i + 2], d += buf[i + 3];
    sink = sink + a + b + c + d;
  });
  return static_cast<double>(bytes) / s * 1e-9;
}

TEST(KernelBench, DISABLED_MatmulRoofline) {
  test::IsaGuard guard;
  std::mt19937 rng(2);
  const uint64_t kRing = 256ull << 20;
  std::printf("ISA %s, one thread; read bandwidth: %.1f GB/s (256 MB), %.1f GB/s (4 MB)\n",
              isa_name(active_isa()), read_bandwidth(kRing), read_bandwidth(4ull << 20));
  struct Shape {
    const char* name;
    int64_t rows, cols;
  };
  const int ns[] = {2, 4, 8, 16, 64};
  for (const Shape& sh :
       {Shape{"ffn 1536x576", 1536, 576}, Shape{"lm_head 49152x576", 49152, 576}}) {
    std::printf("\n%s                 | n=1 GB/s | time(n)/time(1) n=2    4     8    16    64\n",
                sh.name);
    const auto x = test::random_floats(64 * sh.cols, rng);  // [64, cols]
    std::vector<float> y(64 * sh.rows);
    for (DType t : test::kAllTypes) {
      // K-quants have 256-value blocks: 576 columns round down to 512 (noted in the table).
      const int64_t be = dtype_traits(t).block_elems, cols = sh.cols / be * be;
      const auto w0 = random_matrix_bytes(t, sh.rows, cols, rng);
      const uint64_t bytes = w0.size();
      const int copies = static_cast<int>(std::max<uint64_t>(1, (kRing + bytes - 1) / bytes));
      std::vector<std::vector<uint8_t>> ring(copies, w0);
      const uint64_t rb = dtype_row_bytes(t, cols);
      for (bool integer : {false, true}) {
        if (integer && !has_packed_kernel(t)) continue;
        std::vector<WeightMatrix> ms;
        for (auto& c : ring) {
          const WeightMatrix m{t, c.data(), sh.rows, cols, rb};
          ms.push_back(integer ? prepare_matmul_weight(m) : m);
        }
        // The integer path on each of the top two ISAs (AMX differs from AVX-512 only there).
        std::vector<Isa> isas = {detected_isa()};
        if (integer && detected_isa() == Isa::Amx) isas = {Isa::Avx512, Isa::Amx};
        for (Isa isa : isas)
        for (bool dram : {false, true}) {
          force_isa(isa);
          int next = 0;
          auto call = [&](int64_t n) {
            const WeightMatrix& m = ms[dram ? next++ % copies : 0];
            matmul(m, x.data(), y.data(), n, nullptr);
          };
          const double s1 = seconds_per_call(CLOCK_THREAD_CPUTIME_ID, [&] { call(1); });
          std::printf("  %-5s %-7s %-6s %-6s | %7.2f  |   ", std::string(dtype_name(t)).c_str(),
                      integer ? "integer" : "float", isa_name(isa), dram ? "DRAM" : "cached",
                      static_cast<double>(bytes) / s1 * 1e-9);
          for (int n : ns)
            std::printf(" %5.2f", seconds_per_call(CLOCK_THREAD_CPUTIME_ID, [&] { call(n); }) / s1);
          if (cols != sh.cols) std::printf("   (%lld columns)", static_cast<long long>(cols));
          std::printf("\n");
          std::fflush(stdout);
        }
      }
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

TEST(KernelBench, DISABLED_AttentionBlock) {
  std::mt19937 rng(5);
  const int64_t hd = 64, kv_heads = 3, G = 3, heads = kv_heads * G;
  for (int64_t P : {32, 200, 1000})
    for (int64_t n : {1, 4, 12}) {
      const int64_t pos = P + n, row = kv_heads * hd;
      const auto kv_store = test::random_floats(2 * pos * row, rng);  // [K rows | V rows]
      std::vector<const float*> k(pos), v(pos);
      for (int64_t p = 0; p < pos; ++p) {
        k[p] = kv_store.data() + p * row;
        v[p] = kv_store.data() + (pos + p) * row;
      }
      std::vector<int64_t> block(n);
      for (int64_t i = 0; i < n; ++i) block[i] = P + i;
      const auto q = test::random_floats(n * heads * hd, rng);
      std::vector<float> out(q.size());
      std::vector<float> scratch(attention_slots_scratch_floats(pos, hd, n * G));
      auto at = [&](int64_t i, int64_t h) { return (i * heads + h) * hd; };  // [n, heads, hd]
      const double by_row = seconds_per_call(CLOCK_THREAD_CPUTIME_ID, [&] {
        for (int64_t g = 0; g < kv_heads; ++g)
          for (int64_t i = 0; i < n; ++i) {
            const KvRows kv{k.data(), v.data(), P, block.data(), i + 1, g * hd};
            const float* qs[G];
            float* os[G];
            for (int64_t h = 0; h < G; ++h) {
              qs[h] = q.data() + at(i, g * G + h);
              os[h] = out.data() + at(i, g * G + h);
            }
            attention_heads(qs, os, G, kv, hd, 0.125f, scratch.data());
          }
      });
      const double one_pass = seconds_per_call(CLOCK_THREAD_CPUTIME_ID, [&] {
        for (int64_t g = 0; g < kv_heads; ++g) {
          const KvRows kv{k.data(), v.data(), P, block.data(), n, g * hd};
          std::vector<const float*> qs;
          std::vector<float*> os;
          std::vector<int64_t> totals;
          for (int64_t i = n - 1; i >= 0; --i)  // longest row first
            for (int64_t h = 0; h < G; ++h) {
              qs.push_back(q.data() + at(i, g * G + h));
              os.push_back(out.data() + at(i, g * G + h));
              totals.push_back(P + i + 1);
            }
          attention_slots(qs.data(), os.data(), totals.data(), static_cast<int>(qs.size()), kv,
                          hd, 0.125f, scratch.data());
        }
      });
      const double pairs = static_cast<double>((P * n + n * (n + 1) / 2) * heads);
      std::printf("attention %s, P %4ld, n %2ld: row by row %7.1f us (%.2f ns per key and head), "
                  "one pass %7.1f us (%.2f)\n",
                  isa_name(active_isa()), static_cast<long>(P), static_cast<long>(n),
                  by_row * 1e6, by_row * 1e9 / pairs, one_pass * 1e6, one_pass * 1e9 / pairs);
    }
}

}  // namespace
}  // namespace ssd::kernels
