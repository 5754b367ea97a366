// Weight-matrix x activations: the dispatch between the integer and the float path (matmul.h).
//
// Integer path: the activations are quantized once per call, on the calling thread, into a
// buffer that thread keeps (thread_local, so concurrent callers never share one); the workers
// then each take a contiguous range of 16-row tiles and run every token group over a tile while
// it is in cache, so each weight byte comes from memory once per call whatever n is.
//
// Float path: a weight row is decoded block by block and multiplied with up to kMaxDotTokens
// tokens at once; rows go in small blocks that stay in L1 for the remaining token groups.
//
// Either way a row's result never depends on which thread computes it or which tokens share its
// group, because the split is over whole rows (tiles) and the kernels give each token the same
// operations in the same order for every group size.
#include "kernels/cpu/matmul.h"

#include <algorithm>
#include <vector>

#include "kernels/cpu/act_q8.h"
#include "kernels/cpu/packed_matrix.h"
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
  if (w.packed)
    SSD_CHECK(w.packed->type == w.type && w.packed->rows == w.rows && w.packed->cols == w.cols,
              "matmul: packed copy ({} x {} {}) does not match the matrix ({} x {} {})",
              w.packed->rows, w.packed->cols, dtype_name(w.packed->type), w.rows, w.cols, tr.name);
}

template <class F>
void run(ThreadPool* pool, int64_t count, const F& fn) {
  if (pool && pool->size() > 1)
    pool->parallel_for(count, fn);
  else
    fn(0, count, 0);
}

void matmul_packed(const PackedMatrix& p, const float* x, float* y, int64_t n, ThreadPool* pool) {
  thread_local ActQ8Buffer buffer;
  const ActQ8& a = buffer.quantize(x, n, p.cols);
  const detail::PackedKernel k = detail::active_packed_kernel(p.type);
  SSD_ASSERT(k.tile && k.max_tokens > 0);
  run(pool, p.tiles, [&](int64_t t0, int64_t t1, int) {
    for (int64_t tile = t0; tile < t1; ++tile)
      for (int64_t i = 0; i < n; i += k.max_tokens)
        k.tile(p, tile, a, i, static_cast<int>(std::min<int64_t>(k.max_tokens, n - i)), y, p.rows);
  });
}

// Float path: rows in blocks of kRowBlock; each token group runs over the whole block, so that
// the block's rows (re-read from L1 by the later groups) and one group's activations, rather
// than all n tokens' activations, are what has to stay in cache. Rows kPrefetchRows ahead are
// prefetched so that DRAM keeps streaming while a block is multiplied.
constexpr int64_t kRowBlock = 8, kPrefetchRows = 2;

void matmul_float(const WeightMatrix& w, const float* x, float* y, int64_t n, ThreadPool* pool) {
  const detail::DotFn dot = detail::active_kernels(w.type).dot;
  const int64_t rows = w.rows, cols = w.cols;
  run(pool, rows, [&](int64_t r0, int64_t r1, int) {
    float out[detail::kMaxDotTokens];
    for (int64_t b0 = r0; b0 < r1; b0 += kRowBlock) {
      const int64_t b1 = std::min(b0 + kRowBlock, r1);
      const uint8_t* block = w.data + static_cast<uint64_t>(b0) * w.row_bytes;
      for (int64_t t0 = 0; t0 < n; t0 += detail::kMaxDotTokens) {
        const int nt = static_cast<int>(std::min<int64_t>(detail::kMaxDotTokens, n - t0));
        for (int64_t r = b0; r < b1; ++r) {
          const uint8_t* row = block + static_cast<uint64_t>(r - b0) * w.row_bytes;
          if (t0 == 0 && r + kPrefetchRows < r1)
            for (uint64_t o = 0; o < w.row_bytes; o += 64)
              __builtin_prefetch(row + kPrefetchRows * w.row_bytes + o, 0, 3);
          dot(row, x + t0 * cols, cols, nt, cols, out);
          for (int t = 0; t < nt; ++t) y[(t0 + t) * rows + r] = out[t];
        }
      }
    }
  });
}

}  // namespace

WeightMatrix prepare_matmul_weight(const WeightMatrix& w) {
  WeightMatrix out = w;
  if (has_packed_kernel(w.type) && w.rows > 0 && w.cols > 0) out.packed = pack_matrix(w);
  return out;
}

void matmul(const WeightMatrix& w, const float* x, float* y, int64_t n, ThreadPool* pool) {
  check(w, n);
  if (n == 0 || w.rows == 0) return;
  if (w.packed)
    matmul_packed(*w.packed, x, y, n, pool);
  else
    matmul_float(w, x, y, n, pool);
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
