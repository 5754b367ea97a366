// The CPU backend: every op on host memory through kernels/cpu, with one persistent thread pool.
// Weights are used in place from the mapped file (prepare_weight only describes them).
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/rowops.h"
#include "kernels/cpu/thread_pool.h"
#include "runtime/backend/backend.h"
#include "runtime/core/error.h"

namespace ssd {
namespace {

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(int threads) : pool_(threads) {}

  const char* name() const override { return "cpu"; }
  int threads() const override { return pool_.size(); }

  kernels::WeightMatrix prepare_weight(const TensorRef& t) override {
    SSD_ASSERT(t.ne.size() == 2);
    return kernels::WeightMatrix{t.type, t.data, static_cast<int64_t>(t.ne[1]),
                                 static_cast<int64_t>(t.ne[0]), t.row_bytes()};
  }

  void matmul(const kernels::WeightMatrix& w, const float* x, float* y, int64_t n) override {
    kernels::matmul(w, x, y, n, &pool_);
  }

  void embed(const kernels::WeightMatrix& table, const int32_t* tokens, int64_t n,
             float* out) override {
    for (int64_t i = 0; i < n; ++i) {
      SSD_CHECK(tokens[i] >= 0 && tokens[i] < table.rows, "token id {} is outside the vocabulary (0..{})",
                tokens[i], table.rows - 1);
      kernels::dequantize_row(table.type, table.data + tokens[i] * table.row_bytes,
                              out + i * table.cols, table.cols);
    }
  }

  void rmsnorm(const float* x, const float* g, float* y, int64_t rows, int64_t dim,
               float eps) override {
    kernels::rmsnorm(x, g, y, rows, dim, eps);
  }

  void rope(float* x, int64_t n, int64_t n_heads, int64_t head_dim, int64_t rot_dim,
            const int32_t* positions, const float* inv_freq, kernels::RopeLayout layout) override {
    for (int64_t i = 0; i < n; ++i)
      kernels::rope(x + i * n_heads * head_dim, n_heads, head_dim, rot_dim,
                    static_cast<float>(positions[i]), inv_freq, layout);
  }

  void store_kv(KvCache& cache, int64_t layer, const SeqId* seqs, const int64_t* cache_pos,
                const float* k, const float* v, int64_t n) override {
    const int64_t row = cache.config().n_kv_heads * cache.config().head_dim;
    for (int64_t i = 0; i < n; ++i) {
      std::copy(k + i * row, k + (i + 1) * row, cache.key_mut(layer, seqs[i], cache_pos[i]));
      std::copy(v + i * row, v + (i + 1) * row, cache.value_mut(layer, seqs[i], cache_pos[i]));
    }
  }

  void attention(const AttentionCall& c) override {
    const int64_t group = c.n_heads / c.n_kv_heads;
    pool_.parallel_for(c.n * c.n_heads, [&](int64_t begin, int64_t end, int) {
      std::vector<float> scores;
      for (int64_t task = begin; task < end; ++task) {
        const int64_t i = task / c.n_heads, h = task % c.n_heads;
        const int64_t g = c.kv_head_of ? c.kv_head_of[h] : h / group;
        const float* q = c.q + (i * c.n_heads + h) * c.head_dim;
        float* out = c.out + (i * c.n_heads + h) * c.head_dim;
        const KvCache::SeqView view = c.cache->view(c.seqs[i]);
        const int64_t prefix = c.prefix_len[i];
        const int64_t* extra = c.visible + c.visible_offsets[i];
        const int64_t n_extra = c.visible_offsets[i + 1] - c.visible_offsets[i];
        const int64_t total = prefix + n_extra;
        scores.resize(total);
        auto pos_of = [&](int64_t t) { return t < prefix ? t : extra[t - prefix]; };
        float max_s = -std::numeric_limits<float>::infinity();
        for (int64_t t = 0; t < total; ++t) {
          const float* k = view.key(c.layer, pos_of(t)) + g * c.head_dim;
          float s = 0;
          for (int64_t d = 0; d < c.head_dim; ++d) s += q[d] * k[d];
          scores[t] = s * c.scale;
          max_s = std::max(max_s, scores[t]);
        }
        float sum = 0;
        for (int64_t t = 0; t < total; ++t) {
          scores[t] = std::exp(scores[t] - max_s);
          sum += scores[t];
        }
        std::fill(out, out + c.head_dim, 0.0f);
        const float inv = total > 0 ? 1.0f / sum : 0.0f;
        for (int64_t t = 0; t < total; ++t) {
          const float* v = view.value(c.layer, pos_of(t)) + g * c.head_dim;
          const float p = scores[t] * inv;
          for (int64_t d = 0; d < c.head_dim; ++d) out[d] += p * v[d];
        }
      }
    });
  }

  void swiglu(const float* gate, const float* up, float* out, int64_t count) override {
    kernels::swiglu(gate, up, out, count);
  }

  void add(float* y, const float* x, int64_t count) override {
    for (int64_t i = 0; i < count; ++i) y[i] += x[i];
  }

  void add_bias(float* y, const float* b, int64_t rows, int64_t cols) override {
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) y[r * cols + c] += b[c];
  }

 private:
  kernels::ThreadPool pool_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(int threads) {
  SSD_CHECK(threads >= 1 && threads <= 1024, "--threads {} must be between 1 and 1024", threads);
  return std::make_unique<CpuBackend>(threads);
}

}  // namespace ssd
