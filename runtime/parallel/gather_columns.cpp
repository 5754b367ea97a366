// One allgatherv, then the rank blocks are interleaved row by row (see gather_columns.h).
#include "runtime/parallel/gather_columns.h"

#include <algorithm>

#include "runtime/core/error.h"

namespace ssd {

void gather_columns(Collective& comm, const float* local, int64_t rows,
                    const std::vector<int64_t>& off, std::vector<float>& scratch, float* out) {
  const int T = comm.size();
  SSD_ASSERT(static_cast<int>(off.size()) == T + 1);
  const int64_t width = off[T];
  if (T == 1) {  // nothing to exchange
    std::copy_n(local, rows * width, out);
    return;
  }
  std::vector<int64_t> counts(T);
  for (int r = 0; r < T; ++r) counts[r] = rows * (off[r + 1] - off[r]);
  scratch.resize(static_cast<size_t>(rows * width));
  comm.allgatherv(local, counts.data(), scratch.data());
  // scratch: rank 0's [rows, w0] block, then rank 1's [rows, w1], ...
  const float* src = scratch.data();
  for (int r = 0; r < T; ++r) {
    const int64_t w = off[r + 1] - off[r];
    for (int64_t i = 0; i < rows; ++i, src += w) std::copy_n(src, w, out + i * width + off[r]);
  }
}

}  // namespace ssd
