// Weight-matrix x activations. Rows are the outer loop and tokens the inner one: a weight row is
// decoded block by block and multiplied with up to kMaxDotTokens tokens at once, and the row
// stays in L1 for the remaining token groups, so each weight byte comes from memory once per call
// whatever n is. The rows are split into contiguous chunks, one per pool thread.
#include "kernels/cpu/matmul.h"

#include <algorithm>
#include <vector>

#include "kernels/cpu/rowops_table.h"
#include "kernels/cpu/thread_pool.h"
#include "runtime/core/error.h"

namespace ssd::kernels {
namespace {

void check(const WeightMatrix& w, int64_t n) {
  const auto& tr = dtype_traits(w.type);
  SSD_CHECK(w.rows >= 0 && w.cols >= 0 && n >= 0, "matmul: bad shape rows={} cols={} n={}", w.rows,
            w.cols, n);
  SSD_CHECK(w.cols % tr.block_elems == 0,
            "matmul: {} weight has {} columns, not a multiple of its block size {}", tr.name,
            w.cols, tr.block_elems);
  SSD_CHECK(w.row_bytes >= dtype_row_bytes(w.type, static_cast<uint64_t>(w.cols)),
            "matmul: row stride {} bytes is less than a {}-column {} row ({} bytes)", w.row_bytes,
            w.cols, tr.name, dtype_row_bytes(w.type, static_cast<uint64_t>(w.cols)));
  SSD_CHECK(w.data || w.rows == 0, "matmul: weight data is null");
}

}  // namespace

void matmul(const WeightMatrix& w, const float* x, float* y, int64_t n, ThreadPool* pool) {
  check(w, n);
  if (n == 0 || w.rows == 0) return;
  const detail::DotFn dot = detail::active_kernels(w.type).dot;
  const int64_t rows = w.rows, cols = w.cols;
  auto run = [&](int64_t r0, int64_t r1, int) {
    float out[detail::kMaxDotTokens];
    for (int64_t r = r0; r < r1; ++r) {
      const uint8_t* row = w.data + static_cast<uint64_t>(r) * w.row_bytes;
      for (int64_t t0 = 0; t0 < n; t0 += detail::kMaxDotTokens) {
        const int nt = static_cast<int>(std::min<int64_t>(detail::kMaxDotTokens, n - t0));
        dot(row, x + t0 * cols, cols, nt, cols, out);
        for (int t = 0; t < nt; ++t) y[(t0 + t) * rows + r] = out[t];
      }
    }
  };
  if (pool && pool->size() > 1)
    pool->parallel_for(rows, run);
  else
    run(0, rows, 0);
}

void matmul_ref(const WeightMatrix& w, const float* x, float* y, int64_t n) {
  check(w, n);
  std::vector<float> row(static_cast<size_t>(w.cols));
  for (int64_t r = 0; r < w.rows; ++r) {
    ref::dequantize_row(w.type, w.data + static_cast<uint64_t>(r) * w.row_bytes, row.data(),
                        w.cols);
    for (int64_t t = 0; t < n; ++t) {
      double acc = 0.0;
      for (int64_t c = 0; c < w.cols; ++c)
        acc += static_cast<double>(row[c]) * static_cast<double>(x[t * w.cols + c]);
      y[t * w.rows + r] = static_cast<float>(acc);
    }
  }
}

}  // namespace ssd::kernels
