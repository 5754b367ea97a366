// The arithmetic of the two tensor-parallel exchanges (runtime/parallel/collective.h), as SSD_HD
// functions shared by the host code (runtime/parallel/gather_columns.cpp, the rank-order sum of
// actors/transport/nccl/nccl_collective.cpp) and the CUDA kernels that finish an exchange on the
// device after NCCL moved the bytes (kernels/cuda/exchange.cu):
//
//   rank-order sum    gathered: [T, count], rank r's contribution in row r
//                     out[i] = ((g[0][i] + g[1][i]) + g[2][i]) + ... + g[T-1][i]
//                     (the order collective.h promises, so every rank and every backend holds
//                     the same bits; no FMA can arise: only additions)
//   column stitching  gathered: rank 0's [rows, w0] block, then rank 1's [rows, w1], ...
//                     (w_r = off[r+1] - off[r], what one allgatherv of the blocks leaves)
//                     out: [rows, off[T]], out[i, c] = gathered[stitch_source(off, T, rows, i, c)]
//                     Rank r's block starts at rows * off[r], because the blocks before it hold
//                     rows * (w_0 + ... + w_{r-1}) = rows * off[r] values.
#pragma once

#include <cstdint>

#include "kernels/common/hd.h"

namespace ssd::kernels::hd {

// Element i of the rank-order sum of `gathered` ([ranks, count]).
SSD_HD float rank_order_sum(const float* gathered, int ranks, int64_t count, int64_t i) {
  float acc = gathered[i];
  for (int r = 1; r < ranks; ++r) acc = add_rn(acc, gathered[static_cast<int64_t>(r) * count + i]);
  return acc;
}

// The rank whose columns hold column c: the r with off[r] <= c < off[r+1] (off: [ranks + 1],
// non-decreasing, c < off[ranks]). Empty ranks (off[r] == off[r+1]) are skipped.
SSD_HD int stitch_rank(const int64_t* off, int ranks, int64_t c) {
  int r = 0;
  while (r + 1 < ranks && off[r + 1] <= c) ++r;
  return r;
}

// Where out[i, c] of a stitched [rows, off[ranks]] matrix is in `gathered` (see the top).
SSD_HD int64_t stitch_source(const int64_t* off, int ranks, int64_t rows, int64_t i, int64_t c) {
  const int r = stitch_rank(off, ranks, c);
  const int64_t w = off[r + 1] - off[r];
  return rows * off[r] + i * w + (c - off[r]);
}

}  // namespace ssd::kernels::hd
