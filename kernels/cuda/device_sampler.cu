// The kernels of device sampling (runtime/backend/cuda/device_sampler.h): ssd::process() and the
// token draw for one row of logits, following the plan of kernels/common/process_math.h step by
// step with its SSD_HD functions (whose CPU twin test,
// tests/unit/device_math/process_twin_test.cpp, checks that the plan gives the CPU sampler's list
// bit for bit):
//   row_stats  one block: l_max (NaN ignored), valid logits, the first +inf (the caller's error);
//   keys       one thread per token: e_i and its candidate key (kNoKey when not a candidate);
//   sort       CUB radix sort of the n keys (unique keys: every correct sort agrees);
//   gather     one thread per entry: e in list order (es[i] = e[id of sorted[i]]), written over
//              the keys, which the sort no longer needs;
//   select     one block: Z, top-p's cut, min-p's cut, trailing zeros and the kept sum. The sums
//              and the top-p search run in the blocked order of kernels/common/blocked_scan.h,
//              shared by the block (kernels/cuda/block_scan.cuh): chunks of 64 entries, one
//              thread per chunk, a Kogge-Stone tree over the chunk totals; the CPU sampler sums
//              in the same order, so the bits agree. The min-p and trailing-zero cuts are
//              searches (the block's smallest / largest index);
//   probs      one thread per kept entry: id and es / sum;
//   draw       one block: the blocked inverse CDF at philox_uniform(seed, stream, step, lane).
// An invalid row (no valid logit, or a +inf) keeps nothing; the host reads RowStats and throws
// the CPU sampler's message. Nothing here synchronises. Not yet run on a GPU.
#include <cub/device/device_radix_sort.cuh>

#include <climits>

#include "kernels/common/process_math.h"
#include "kernels/common/row_math.h"
#include "kernels/cuda/block_scan.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_sampler_kernels.cuh"

namespace ssd::cuda {
namespace {

namespace hd = kernels::hd;
constexpr int kThreads = hd::kRowThreads;

__global__ void row_stats_kernel(const float* logits, int32_t n, RowStats* stats) {
  __shared__ float s_max[kThreads];
  __shared__ int32_t s_valid[kThreads], s_inf[kThreads];
  const int t = static_cast<int>(threadIdx.x);
  float m = -hd::f32_from_bits(0x7f800000u);
  int32_t valid = 0, inf_at = INT_MAX;
  for (int32_t i = t; i < n; i += kThreads) {
    const float x = logits[i];
    if (x > m) m = x;  // NaN never wins (as max_logit)
    valid += hd::valid_logit(x) ? 1 : 0;
    if (x == hd::f32_from_bits(0x7f800000u) && i < inf_at) inf_at = i;
  }
  s_max[t] = m;
  s_valid[t] = valid;
  s_inf[t] = inf_at;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s /= 2) {
    if (t < s) {
      if (s_max[t + s] > s_max[t]) s_max[t] = s_max[t + s];
      s_valid[t] += s_valid[t + s];
      if (s_inf[t + s] < s_inf[t]) s_inf[t] = s_inf[t + s];
    }
    __syncthreads();
  }
  if (t == 0) {
    stats->l_max = s_max[0];
    stats->n_valid = s_valid[0];
    stats->inf_at = s_inf[0] == INT_MAX ? -1 : s_inf[0];
  }
}

__global__ void keys_kernel(const float* logits, int32_t n, double t, int32_t top_k, double min_p,
                            const RowStats* stats, double* e, uint64_t* keys) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const bool top_k_path = hd::use_top_k_path(top_k, stats->n_valid);
  const double ei = hd::relative_exp_one(logits[i], stats->l_max, t);
  e[i] = ei;
  keys[i] = hd::candidate_key(logits[i], static_cast<int32_t>(i), ei, top_k_path, min_p);
}

// The number of real keys in a sorted key array (kNoKey sorts last).
__device__ int64_t count_real_keys(const uint64_t* sorted, int64_t n) {
  int64_t lo = 0, hi = n;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (sorted[mid] == hd::kNoKey) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

__global__ void gather_sorted_kernel(const double* e, const uint64_t* sorted, int32_t n,
                                     double* es) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n || sorted[i] == hd::kNoKey) return;
  es[i] = e[hd::order_key_id(sorted[i])];
}

// Steps 4-6 of the plan over the block; stats->keep and stats->sum. scan: [2 * chunks(n)].
__global__ void select_kernel(const double* e, const double* es, const uint64_t* sorted,
                              int32_t n, int32_t top_k, double top_p, double min_p, double* scan,
                              RowStats* stats) {
  const int t = static_cast<int>(threadIdx.x);
  if (!(stats->n_valid > 0 && stats->inf_at < 0)) {  // the same for every thread
    if (t == 0) {
      stats->keep = 0;
      stats->sum = 0;
    }
    return;
  }
  const bool top_k_path = hd::use_top_k_path(top_k, stats->n_valid);
  auto e_by_id = [e](int64_t i) { return e[i]; };
  auto e_of = [es](int64_t i) { return es[i]; };  // e in list order (gather_sorted_kernel)
  double* a = scan;
  double* b = scan + hd::scan_chunks(n);
  const int64_t n_cand = top_k_path ? top_k : count_real_keys(sorted, n);
  double z = 0;
  if (!top_k_path) {  // Z over the whole vocabulary, by token id
    z = hd::blocked_sum(block_chunk_prefix<kThreads>(n, e_by_id, a, b), n, e_by_id);
    __syncthreads();  // every thread has read the prefixes before a and b are reused
  }
  const double* pre = block_chunk_prefix<kThreads>(n_cand, e_of, a, b);  // of the list
  if (top_k_path) z = hd::blocked_sum(pre, n_cand, e_of);
  int64_t keep =
      top_p < 1 ? block_top_p_count<kThreads>(pre, n_cand, e_of, hd::dmul_rn(top_p, z)) : n_cand;
  if (top_k_path && min_p > 0) {  // the first entry below min_p ends the list
    int64_t below = keep;
    for (int64_t i = t; i < keep; i += kThreads)
      if (!(e_of(i) >= min_p)) {
        below = i;
        break;
      }
    keep = block_extreme<kThreads>(below, true);
  }
  if (keep > 1) {  // trailing zeros dropped, never the first entry
    int64_t last = 0;
    for (int64_t i = t; i < keep; i += kThreads)
      if (e_of(i) != 0) last = i;
    keep = block_extreme<kThreads>(last, false) + 1;
  }
  if (t == 0) {
    stats->keep = keep;
    stats->sum = hd::blocked_sum(pre, keep, e_of);
  }
}

__global__ void probs_kernel(const double* es, const uint64_t* sorted, const RowStats* stats,
                             int32_t* ids, double* probs) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= stats->keep) return;
  ids[i] = hd::order_key_id(sorted[i]);
  probs[i] = es[i] / stats->sum;
}

// The blocked inverse CDF over the kept list (ssd::sample). scan: [2 * chunks(keep)].
__global__ void draw_kernel(const double* probs, const int32_t* ids, const RowStats* stats,
                            uint64_t seed, uint64_t stream, uint32_t step, uint32_t lane,
                            double* scan, int32_t* token) {
  const int64_t keep = stats->keep;
  const bool first = threadIdx.x == 0;
  if (keep == 0) {
    if (first) *token = -1;
    return;
  }
  auto p = [probs](int64_t i) { return probs[i]; };
  const double* pre = block_chunk_prefix<kThreads>(keep, p, scan, scan + hd::scan_chunks(keep));
  const double u = hd::philox_uniform(seed, stream, step, lane);
  const int64_t i = block_inverse_cdf<kThreads>(pre, keep, p, u);
  if (first) *token = ids[i];  // every kept probability is > 0, so i >= 0
}

unsigned blocks_for(int64_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

}  // namespace

size_t process_sort_scratch_bytes(int32_t n) {
  size_t bytes = 0;
  SSD_CUDA_CHECK(cub::DeviceRadixSort::SortKeys(nullptr, bytes, static_cast<uint64_t*>(nullptr),
                                                static_cast<uint64_t*>(nullptr), n, 0, 64));
  return bytes;
}

void launch_process_row(const float* logits, int32_t n, double temperature, int32_t top_k,
                        double top_p, double min_p, const ProcessScratch& s, int32_t* ids,
                        double* probs, cudaStream_t st) {
  row_stats_kernel<<<1, kThreads, 0, st>>>(logits, n, s.stats);
  SSD_CUDA_LAUNCHED();
  keys_kernel<<<blocks_for(n), kThreads, 0, st>>>(logits, n, temperature, top_k, min_p, s.stats,
                                                  s.e, s.keys);
  SSD_CUDA_LAUNCHED();
  size_t bytes = s.sort_bytes;
  SSD_CUDA_CHECK(cub::DeviceRadixSort::SortKeys(s.sort_tmp, bytes, s.keys, s.sorted, n, 0, 64,
                                                st));
  double* es = reinterpret_cast<double*>(s.keys);  // [n] free once sorted
  static_assert(sizeof(double) == sizeof(uint64_t));
  gather_sorted_kernel<<<blocks_for(n), kThreads, 0, st>>>(s.e, s.sorted, n, es);
  SSD_CUDA_LAUNCHED();
  select_kernel<<<1, kThreads, 0, st>>>(s.e, es, s.sorted, n, top_k, top_p, min_p, s.scan,
                                        s.stats);
  SSD_CUDA_LAUNCHED();
  probs_kernel<<<blocks_for(n), kThreads, 0, st>>>(es, s.sorted, s.stats, ids, probs);
  SSD_CUDA_LAUNCHED();
}

void launch_draw_row(const double* probs, const int32_t* ids, const RowStats* stats,
                     uint64_t seed, uint64_t stream, uint32_t step, uint32_t lane, double* scan,
                     int32_t* token, cudaStream_t st) {
  draw_kernel<<<1, kThreads, 0, st>>>(probs, ids, stats, seed, stream, step, lane, scan, token);
  SSD_CUDA_LAUNCHED();
}

}  // namespace ssd::cuda
