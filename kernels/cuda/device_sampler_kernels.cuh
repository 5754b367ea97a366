// Launchers of device sampling's kernels (kernels/cuda/device_sampler.cu; the plan and its CPU
// twin: kernels/common/process_math.h). Device pointers; each launch is checked, none
// synchronises. Used by DeviceSampler (device_sampler.h), which owns the scratch.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/common/blocked_scan.h"

namespace ssd::cuda {

// What the kernels of one row tell each other and the host (device memory, one per row).
struct RowStats {
  float l_max = 0;      // the largest logit, NaN ignored (-inf when none)
  int32_t n_valid = 0;  // logits neither -inf nor NaN
  int32_t inf_at = -1;  // the first +inf logit (an error), -1 when none
  int64_t keep = 0;     // entries of the processed list (0 for an invalid row)
  double sum = 0;       // their e summed in list order (blocked: kernels/common/blocked_scan.h)
};

// Doubles of block-scan scratch a row of up to n tokens needs (two arrays of chunk prefixes).
inline size_t process_scan_doubles(int32_t n) {
  return 2 * static_cast<size_t>(kernels::hd::scan_chunks(n));
}

// Device scratch for a row of up to n tokens.
struct ProcessScratch {
  double* e = nullptr;         // [n] e_i by token id
  uint64_t* keys = nullptr;    // [n] candidate keys by token id; after the sort, e in list order
  uint64_t* sorted = nullptr;  // [n] the keys sorted
  void* sort_tmp = nullptr;    // CUB's temporary storage,
  size_t sort_bytes = 0;       //   process_sort_scratch_bytes(n) bytes
  RowStats* stats = nullptr;   // [1]
  double* scan = nullptr;      // [process_scan_doubles(n)] the block scans' chunk prefixes
};

// Bytes of CUB temporary storage the sort of n keys needs.
size_t process_sort_scratch_bytes(int32_t n);

// ssd::process() of logits[0..n) for a sampling (temperature > 0) config: ids[0..keep) and
// probs[0..keep) of the processed list, keep in s.stats->keep. ids, probs: [n].
void launch_process_row(const float* logits, int32_t n, double temperature, int32_t top_k,
                        double top_p, double min_p, const ProcessScratch& s, int32_t* ids,
                        double* probs, cudaStream_t st);

// *token = the entry ssd::sample(list, philox_uniform(seed, stream, step, lane)) picks from the
// list launch_process_row left (-1 for an invalid row). scan: [process_scan_doubles(n)] (the
// row's ProcessScratch::scan may be passed: the draw runs after the row's kernels, in order).
void launch_draw_row(const double* probs, const int32_t* ids, const RowStats* stats,
                     uint64_t seed, uint64_t stream, uint32_t step, uint32_t lane, double* scan,
                     int32_t* token, cudaStream_t st);

// Rows processed one after the other (row r: ids/probs[r * stride ..], count stats[r].keep) as
// one CSR list (pack_rows.cu): off[0..rows] (off[r] = counts of the rows before r), the entries
// in packed_ids / packed_probs, [off[rows]] each.
void launch_pack_rows(const RowStats* stats, int32_t rows, int64_t stride, const int32_t* ids,
                      const double* probs, int64_t* off, int32_t* packed_ids,
                      double* packed_probs, cudaStream_t st);

}  // namespace ssd::cuda
