// The CPU backend: every op on host memory through kernels/cpu, with one persistent thread pool.
// Weights: block-quantized ones are repacked once for the integer matmul, the others copied once
// into huge pages (prepare_weight, CpuWeight); embedding rows of a packed table are read from the
// mapped file.
//
// Scheduling, for a decoded token of a small model (~200 ops, each a few microseconds):
//   - matmul splits weight rows over the pool (kernels/cpu/matmul.cpp);
//   - attention runs the whole batch in one parallel region, the threads claiming tasks from a
//     shared counter (largest first) so that a causal prefill, whose late queries see many more
//     keys than its early ones, keeps every core busy to the end; the rows of a causal block
//     (their visible positions nest) share one pass over the cached K/V rows per task
//     (kernels::attention_slots), a block being split into parts of rows so that the threads
//     get about equal shares (plan_attention_tasks); a row that does not nest (a tree branch)
//     runs alone;
//   - the page table of each sequence is walked once per layer into per-position row pointers
//     that all of its queries and heads share;
//   - element-wise ops (RMSNorm, RoPE, SwiGLU, adds, K/V stores, embedding rows) run on the
//     calling thread when small (a hand-off would cost more than the work) and over the pool
//     when a batch makes them large (prefill);
//   - RoPE's cos/sin of a position are computed once and reused by Q and K of every layer.
// None of this changes a bit of any result: each element or (query, head) is computed by the
// same code whatever the batch, the split or the thread.
#include "runtime/backend/cpu/cpu_backend.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <new>
#include <span>
#include <utility>
#include <vector>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/packed_matrix.h"
#include "kernels/cpu/rowops.h"
#include "kernels/cpu/thread_pool.h"
#include "runtime/core/error.h"
#include "runtime/core/huge_page_arena.h"
#include "runtime/parallel/gather_columns.h"

namespace ssd {
namespace {

// The CPU backend's prepared form of a weight (Weight::prepared): the matmul's packed integer
// tiles, or, for the float path, a copy of the file's rows in huge pages
// (runtime/core/huge_page_arena.h), which Weight::data then points at. A step streams every
// weight, and the mapped file's 4 KiB pages cost a TLB miss each (the Domino drafter's BF16
// backbone: a draft 10% faster from the copy, docs/performance.md).
struct CpuWeight {
  std::shared_ptr<const kernels::PackedMatrix> packed;  // null: the float path
  std::shared_ptr<const uint8_t> resident;              // the float path's copy of the rows
};

// The engine's Weight and kernels/cpu's WeightMatrix describe the same bytes.
Weight as_weight(const kernels::WeightMatrix& w, std::shared_ptr<const CpuWeight> prepared) {
  return Weight{w.type, w.data, w.rows, w.cols, w.row_bytes, std::move(prepared)};
}
kernels::WeightMatrix as_matrix(const Weight& w) {
  const auto* p = static_cast<const CpuWeight*>(w.prepared.get());
  return kernels::WeightMatrix{w.type, w.data, w.rows, w.cols, w.row_bytes,
                               p ? p->packed : nullptr};
}

// bytes of data, copied into the process's huge-page arena.
std::shared_ptr<const uint8_t> resident_copy(const uint8_t* data, uint64_t bytes) {
  uint8_t* copy = HugePageArena::shared().allocate(bytes);
  std::memcpy(copy, data, bytes);
  return std::shared_ptr<const uint8_t>(
      copy, [](const uint8_t* q) { HugePageArena::shared().release(const_cast<uint8_t*>(q)); });
}

}  // namespace

namespace {

// Below this many floats an element-wise op stays on the calling thread: at ~1-4 floats per ns
// it is done in < 10 us, the same order as waking the pool and waiting for the slowest thread.
constexpr int64_t kParallelMinFloats = 32768;

// An attention task holds at most this many rows of a causal block, and this many (row, head)
// slots: their scores and partial sums stay within a thread's scratch (~200 KB at 1000 cached
// positions) and the slot arrays on its stack.
constexpr int kMaxTaskRows = 16;
constexpr int kMaxTaskSlots = 256;

// cos/sin of one RoPE frequency set at positions [0, size): [pos][cos(half) | sin(half)].
struct RopeTable {
  std::vector<float> inv_freq;  // [half], the key: a table serves only identical frequencies
  std::vector<float> cs;        // [positions, 2 * half]
  std::vector<uint8_t> ready;   // [positions]
};

// Per-position K/V row pointers of one sequence at one layer (see kernels/cpu/attention.h).
struct SeqRows {
  SeqId seq = -1;
  std::vector<const float*> k, v;  // [length]
};

void free_host(void* p) noexcept { ::operator delete(p, std::align_val_t{64}); }
void copy_bytes(void* dst, const void* src, size_t bytes) {
  if (bytes > 0 && dst != src) std::memmove(dst, src, bytes);
}

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(const CpuBackendOptions& o)
      : pool_(kernels::ThreadPool::Options{o.threads, o.pin_cpus, o.spin_us}),
        scores_(static_cast<size_t>(o.threads)) {}

  const char* name() const override { return "cpu"; }
  int threads() const override { return pool_.size(); }

  // Host memory, 64-byte aligned and zeroed; the transfers are memcpy.
  BackendBuffer allocate(size_t bytes) override {
    void* p = ::operator new(bytes, std::align_val_t{64});
    std::memset(p, 0, bytes);
    return BackendBuffer(p, bytes, &free_host);
  }
  void upload(void* dst, const void* src, size_t bytes) override { copy_bytes(dst, src, bytes); }
  void download(void* dst, const void* src, size_t bytes) override { copy_bytes(dst, src, bytes); }
  void copy(void* dst, const void* src, size_t bytes) override { copy_bytes(dst, src, bytes); }

  // kernels/cpu's one-time repacking for its integer matmul path where the type has one
  // (matmul.h; embedding lookups still read the file's rows), else the file's rows copied into
  // huge pages for the float path (CpuWeight). A tensor prepared again while its first prepared
  // form is alive (tied embeddings: the table is also the LM head; a drafter sharing the
  // target's layers) shares it. Only live forms are shared (weak references), so a later model
  // mapped at a reused address gets its own.
  Weight prepare_weight(const TensorRef& t) override {
    SSD_ASSERT(t.ne.size() == 2);
    kernels::WeightMatrix w;
    w.type = t.type;
    w.data = t.data;
    w.rows = static_cast<int64_t>(t.ne[1]);
    w.cols = static_cast<int64_t>(t.ne[0]);
    w.row_bytes = t.row_bytes();
    std::erase_if(prepared_, [](const PreparedRef& p) { return p.prepared.expired(); });
    for (const auto& p : prepared_)
      if (p.file_data == w.data && p.type == w.type && p.rows == w.rows && p.cols == w.cols)
        if (auto live = p.prepared.lock()) {
          if (live->resident) w.data = live->resident.get();
          return as_weight(w, std::move(live));
        }
    const uint8_t* file_data = w.data;
    w = kernels::prepare_matmul_weight(w);
    auto prepared = std::make_shared<CpuWeight>();
    prepared->packed = w.packed;
    const uint64_t bytes = w.row_bytes * static_cast<uint64_t>(w.rows);
    if (!w.packed && w.data && bytes > 0) {
      prepared->resident = resident_copy(w.data, bytes);
      w.data = prepared->resident.get();
    }
    prepared_.push_back(PreparedRef{file_data, w.type, w.rows, w.cols, prepared});
    return as_weight(w, std::move(prepared));
  }

  void matmul(const Weight& w, const float* x, float* y, int64_t n) override {
    kernels::matmul(as_matrix(w), x, y, n, &pool_);
  }

  void embed(const Weight& table, const int32_t* tokens, int64_t n,
             float* out) override {
    for (int64_t i = 0; i < n; ++i)
      SSD_CHECK(tokens[i] >= 0 && tokens[i] < table.rows,
                "token id {} is outside the vocabulary (0..{})", tokens[i], table.rows - 1);
    for_rows(n, table.cols, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i)
        kernels::dequantize_row(table.type, table.data + tokens[i] * table.row_bytes,
                                out + i * table.cols, table.cols);
    });
  }

  void rmsnorm(const float* x, const float* g, float* y, int64_t rows, int64_t dim,
               float eps) override {
    for_rows(rows, dim, [&](int64_t b, int64_t e) {
      kernels::rmsnorm(x + b * dim, g, y + b * dim, e - b, dim, eps);
    });
  }

  void rope(float* x, int64_t n, int64_t n_heads, int64_t head_dim, int64_t rot_dim,
            const int32_t* positions, const float* inv_freq, RopeLayout layout) override {
    SSD_CHECK(rot_dim % 2 == 0 && rot_dim >= 0 && rot_dim <= head_dim,
              "rope: rot_dim {} must be even and at most head_dim {}", rot_dim, head_dim);
    const int64_t half = rot_dim / 2;
    RopeTable& table = rope_table(inv_freq, half);
    for (int64_t i = 0; i < n; ++i) fill_angles(table, positions[i], half);
    const float* cs = table.cs.data();
    const kernels::RopeLayout kernel_layout = layout == RopeLayout::NeoX
                                                  ? kernels::RopeLayout::NeoX
                                                  : kernels::RopeLayout::Interleaved;
    for_rows(n, n_heads * head_dim, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        const float* c = cs + static_cast<int64_t>(positions[i]) * 2 * half;  // [2 * half]
        kernels::rope_rotate(x + i * n_heads * head_dim, n_heads, head_dim, rot_dim, c, c + half,
                             kernel_layout);
      }
    });
  }

  void store_kv(KvCache& cache, int64_t layer, const SeqId* seqs, const int64_t* cache_pos,
                const float* k, const float* v, int64_t n) override {
    const int64_t row = cache.config().n_kv_heads * cache.config().head_dim;
    // key_mut may copy a shared page (copy on write): resolve every slot on this thread first.
    slots_.resize(static_cast<size_t>(2 * n));
    for (int64_t i = 0; i < n; ++i) {
      slots_[2 * i] = cache.key_mut(layer, seqs[i], cache_pos[i]);
      slots_[2 * i + 1] = cache.value_mut(layer, seqs[i], cache_pos[i]);
    }
    for_rows(n, 2 * row, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        std::memcpy(slots_[2 * i], k + i * row, sizeof(float) * row);
        std::memcpy(slots_[2 * i + 1], v + i * row, sizeof(float) * row);
      }
    });
  }

  void attention(const AttentionCall& c) override;

  void swiglu(const float* gate, const float* up, float* out, int64_t count) override {
    for_floats(count, [&](int64_t b, int64_t e) {
      kernels::swiglu(gate + b, up + b, out + b, e - b);
    });
  }

  void add(float* y, const float* x, int64_t count) override {
    for_floats(count, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) y[i] += x[i];
    });
  }

  void add_bias(float* y, const float* bias, int64_t rows, int64_t cols) override {
    for_rows(rows, cols, [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r)
        for (int64_t c = 0; c < cols; ++c) y[r * cols + c] += bias[c];
    });
  }

  // Backend memory is host memory: the Collective exchanges it in place, no copies.
  void allreduce_sum(Collective& comm, float* y, int64_t count, float* scratch) override {
    (void)scratch;
    comm.allreduce_sum(y, count);
  }
  void gather_columns(Collective& comm, const float* local, int64_t rows,
                      const std::vector<int64_t>& off, float* out, float* scratch) override {
    (void)scratch;
    ssd::gather_columns(comm, local, rows, off, gathered_, out);
  }
  // Regions are no-ops here, so a forward with exchanges may be one (the contract is checked
  // the same way as for a forward without).
  bool exchanges_replayable(Collective& comm) override {
    (void)comm;
    return true;
  }

 private:
  std::vector<float> gathered_;  // gather_columns: the blocks in arrival order
  // f(begin, end) over rows of row_floats each: inline when small, over the pool when large.
  template <class F>
  void for_rows(int64_t rows, int64_t row_floats, F&& f) {
    if (rows <= 0) return;
    if (rows == 1 || pool_.size() == 1 || rows * row_floats < kParallelMinFloats) {
      f(int64_t{0}, rows);
      return;
    }
    pool_.parallel_for(rows, [&](int64_t b, int64_t e, int) { f(b, e); });
  }

  // f(begin, end) over [0, count) in chunks whose bounds are multiples of 64 floats.
  template <class F>
  void for_floats(int64_t count, F&& f) {
    if (count <= 0) return;
    if (pool_.size() == 1 || count < kParallelMinFloats) {
      f(int64_t{0}, count);
      return;
    }
    const int64_t blocks = (count + 63) / 64;
    pool_.parallel_for(blocks, [&](int64_t b, int64_t e, int) {
      f(b * 64, std::min(count, e * 64));
    });
  }

  RopeTable& rope_table(const float* inv_freq, int64_t half) {
    for (auto& t : rope_tables_)
      if (static_cast<int64_t>(t.inv_freq.size()) == half &&
          std::equal(t.inv_freq.begin(), t.inv_freq.end(), inv_freq))
        return t;
    if (rope_tables_.size() >= 4) rope_tables_.erase(rope_tables_.begin());  // models in use
    rope_tables_.push_back(RopeTable{std::vector<float>(inv_freq, inv_freq + half), {}, {}});
    return rope_tables_.back();
  }

  static void fill_angles(RopeTable& t, int32_t pos, int64_t half) {
    SSD_CHECK(pos >= 0, "rope: negative position {}", pos);
    const size_t p = static_cast<size_t>(pos);
    if (p >= t.ready.size()) {
      const size_t size = std::max<size_t>(p + 1, 2 * t.ready.size());
      t.ready.resize(size, 0);
      t.cs.resize(size * 2 * static_cast<size_t>(half));
    }
    if (t.ready[p]) return;
    float* c = t.cs.data() + p * 2 * static_cast<size_t>(half);
    kernels::rope_angles(static_cast<float>(pos), t.inv_freq.data(), 2 * half, c, c + half);
    t.ready[p] = 1;
  }

  // The row pointers of sequence `seq` at `layer`, built from its page table once per call.
  int32_t rows_of(const AttentionCall& c, SeqId seq) {
    for (size_t i = 0; i < n_seq_rows_; ++i)
      if (seq_rows_[i].seq == seq) return static_cast<int32_t>(i);
    if (n_seq_rows_ == seq_rows_.size()) seq_rows_.emplace_back();
    SeqRows& r = seq_rows_[n_seq_rows_];
    r.seq = seq;
    const KvCache::SeqView view = c.cache->view(seq);
    const int64_t page = c.cache->config().page_tokens;
    const int64_t row = c.cache->config().n_kv_heads * c.cache->config().head_dim;
    r.k.resize(static_cast<size_t>(view.length));
    r.v.resize(static_cast<size_t>(view.length));
    // Inside a page, position p + j is j rows after p (the page layout of kv_cache.h).
    for (int64_t p0 = 0; p0 < view.length; p0 += page) {
      const float* k0 = view.key(c.layer, p0);
      const float* v0 = view.value(c.layer, p0);
      const int64_t end = std::min(view.length, p0 + page);
      for (int64_t p = p0; p < end; ++p) {
        r.k[p] = k0 + (p - p0) * row;
        r.v[p] = v0 + (p - p0) * row;
      }
    }
    return static_cast<int32_t>(n_seq_rows_++);
  }

  kernels::ThreadPool pool_;
  struct PreparedRef {
    const uint8_t* file_data;  // the tensor's bytes as the caller gave them
    DType type;
    int64_t rows, cols;
    std::weak_ptr<const CpuWeight> prepared;
  };
  std::vector<PreparedRef> prepared_;  // prepared forms handed out, while they live
  std::vector<std::vector<float>> scores_;  // [threads][attention scratch]
  std::vector<std::vector<int32_t>> group_heads_;  // query heads of each KV head (one call)
  std::vector<RopeTable> rope_tables_;
  std::vector<SeqRows> seq_rows_;
  size_t n_seq_rows_ = 0;
  std::vector<int32_t> query_rows_;  // [n] index into seq_rows_
  // attention's work: chains of nested rows [begin, end) and the tasks they are split into
  struct AttentionTask {
    int64_t first = 0, step = 1, count = 1;  // rows first + k * step, k < count
    int64_t group = 0;                       // index into group_heads_
    int32_t h0 = 0, nh = 0;                  // its query heads: group_heads_[group][h0, h0 + nh)
    int64_t cost = 0;                        // visible positions summed over rows and heads
  };
  void plan_attention_tasks(const AttentionCall& c, int64_t n_groups, int64_t max_rows);
  void split_lone_rows_by_heads(int64_t want);
  std::vector<std::pair<int64_t, int64_t>> chains_;
  std::vector<AttentionTask> tasks_;
  std::vector<AttentionTask> split_tasks_;  // split_lone_rows_by_heads' output, kept for reuse
  std::vector<float*> slots_;        // store_kv: [n][K, V] destination rows
};

void CpuBackend::attention(const AttentionCall& c) {
  SSD_CHECK(c.n >= 0 && c.n_heads > 0 && c.n_kv_heads > 0 && c.head_dim > 0,
            "attention: bad shape n={} heads={} kv_heads={} head_dim={}", c.n, c.n_heads,
            c.n_kv_heads, c.head_dim);
  const KvCacheConfig& cc = c.cache->config();
  SSD_CHECK(c.n_kv_heads == cc.n_kv_heads && c.head_dim == cc.head_dim,
            "attention: call has {} KV heads x {} but the cache holds {} x {}", c.n_kv_heads,
            c.head_dim, cc.n_kv_heads, cc.head_dim);
  SSD_CHECK(c.kv_head_of || c.n_heads % c.n_kv_heads == 0,
            "attention: {} query heads do not group evenly over {} KV heads (give kv_head_of)",
            c.n_heads, c.n_kv_heads);
  if (c.kv_head_of)
    for (int64_t h = 0; h < c.n_heads; ++h)
      SSD_CHECK(c.kv_head_of[h] >= 0 && c.kv_head_of[h] < c.n_kv_heads,
                "attention: query head {} maps to KV head {}, outside 0..{}", h, c.kv_head_of[h],
                c.n_kv_heads - 1);
  if (c.n == 0) return;

  // Page tables walked once per sequence; every position a query sees is checked here.
  n_seq_rows_ = 0;
  query_rows_.resize(static_cast<size_t>(c.n));
  int64_t max_total = 0;
  for (int64_t i = 0; i < c.n; ++i) {
    const int32_t r = rows_of(c, c.seqs[i]);
    query_rows_[i] = r;
    const int64_t length = static_cast<int64_t>(seq_rows_[r].k.size());
    const int64_t n_extra = c.visible_offsets[i + 1] - c.visible_offsets[i];
    SSD_CHECK(c.prefix_len[i] >= 0 && c.prefix_len[i] <= length && n_extra >= 0,
              "attention: query {} sees a prefix of {} positions and {} more in a sequence of {}",
              i, c.prefix_len[i], n_extra, length);
    for (int64_t j = 0; j < n_extra; ++j) {
      const int64_t p = c.visible[c.visible_offsets[i] + j];
      SSD_CHECK(p >= 0 && p < length, "attention: query {} sees position {} of a sequence of {}",
                i, p, length);
    }
    max_total = std::max(max_total, c.prefix_len[i] + n_extra);
  }
  // The query heads of each KV head (grouped-query attention): a task runs all of them over
  // one pass of the K/V rows.
  const int64_t group = c.kv_head_of ? 1 : c.n_heads / c.n_kv_heads;
  group_heads_.assign(static_cast<size_t>(c.n_kv_heads), {});
  for (int64_t h = 0; h < c.n_heads; ++h)
    group_heads_[static_cast<size_t>(c.kv_head_of ? c.kv_head_of[h] : h / group)].push_back(
        static_cast<int32_t>(h));
  std::erase_if(group_heads_, [](const std::vector<int32_t>& g) { return g.empty(); });
  int max_g = 0;
  for (const auto& g : group_heads_) max_g = std::max(max_g, static_cast<int>(g.size()));
  SSD_CHECK(max_g <= 64, "attention: {} query heads read one KV head (at most 64 supported)",
            max_g);
  const int64_t n_groups = static_cast<int64_t>(group_heads_.size());
  const int64_t max_rows = std::max(1, std::min(kMaxTaskRows, kMaxTaskSlots / max_g));
  plan_attention_tasks(c, n_groups, max_rows);
  const int64_t scratch =
      kernels::attention_slots_scratch_floats(max_total, c.head_dim, max_rows * max_g);
  for (auto& s : scores_)
    if (static_cast<int64_t>(s.size()) < scratch) s.resize(static_cast<size_t>(scratch));

  const kernels::detail::AttentionHeadsFn attend = kernels::detail::active_attention_heads();
  const kernels::detail::AttentionSlotsFn attend_rows = kernels::detail::active_attention_slots();
  auto total_of = [&](int64_t i) {
    return c.prefix_len[i] + c.visible_offsets[i + 1] - c.visible_offsets[i];
  };
  const int64_t tasks = static_cast<int64_t>(tasks_.size());
  const int64_t grain = std::max<int64_t>(1, tasks / (16 * pool_.size()));
  pool_.parallel_for_dynamic(tasks, grain, [&](int64_t begin, int64_t end, int tid) {
    float* work = scores_[static_cast<size_t>(tid)].data();
    const float* qs[kMaxTaskSlots];
    float* outs[kMaxTaskSlots];
    int64_t totals[kMaxTaskSlots];
    for (int64_t t = begin; t < end; ++t) {
      const AttentionTask& task = tasks_[static_cast<size_t>(t)];  // largest first
      const std::vector<int32_t>& heads = group_heads_[static_cast<size_t>(task.group)];
      const int64_t g = c.kv_head_of ? c.kv_head_of[heads[0]] : heads[0] / group;
      // The task's rows, longest (last) first; the longest one's positions serve them all.
      const int64_t last = task.first + (task.count - 1) * task.step;
      const SeqRows& rows = seq_rows_[static_cast<size_t>(query_rows_[last])];
      kernels::KvRows kv;
      kv.k = rows.k.data();
      kv.v = rows.v.data();
      kv.prefix = c.prefix_len[last];
      kv.extra = c.visible + c.visible_offsets[last];
      kv.n_extra = c.visible_offsets[last + 1] - c.visible_offsets[last];
      kv.offset = g * c.head_dim;
      int S = 0;
      const std::span<const int32_t> task_heads(heads.data() + task.h0, task.nh);
      for (int64_t i = last; i >= task.first; i -= task.step)
        for (const int32_t h : task_heads) {
          const int64_t at = (i * c.n_heads + h) * c.head_dim;  // q, out: [n, heads, hd]
          qs[S] = c.q + at;
          outs[S] = c.out + at;
          totals[S++] = total_of(i);
        }
      if (task.count == 1)  // a lone row: the single-query kernel, as a decode runs it
        attend(qs, outs, S, kv, c.head_dim, c.scale, work);
      else
        attend_rows(qs, outs, totals, S, kv, c.head_dim, c.scale, work);
    }
  });
}

// Splits the call's rows into tasks. Consecutive rows of one sequence whose visible positions
// nest (the same prefix, each row's list the start of the next one's: a causal block, a
// Domino block whose rows see the same positions) form a chain, run by attention_slots in one
// pass over their K/V rows; any other row (a tree branch) is a chain of its own, run as before.
// A chain is split into parts so that there are at least two tasks per thread when the batch
// allows and no task holds more than max_rows rows: a short block (a verification) into
// interleaved subsets (rows b + p, b + p + parts, ...) that cost the same, a long one (a
// prefill) into contiguous chunks, whose rows all see most of the pass's keys (~8% faster than
// interleaving at 512 rows). One task per (part, KV head group); when that still leaves fewer
// than two tasks per thread, a lone row's task is split further by query heads (each head's
// result does not depend on which heads share its pass). Sorted by cost (visible positions of
// its rows times its heads), largest first.
void CpuBackend::plan_attention_tasks(const AttentionCall& c, int64_t n_groups,
                                      int64_t max_rows) {
  chains_.clear();
  auto extras = [&](int64_t i) { return c.visible_offsets[i + 1] - c.visible_offsets[i]; };
  for (int64_t i = 0; i < c.n; ++i) {
    const int64_t j = i - 1;
    const bool nests = i > 0 && c.seqs[i] == c.seqs[j] && c.prefix_len[i] == c.prefix_len[j] &&
                       extras(i) >= extras(j) &&
                       std::equal(c.visible + c.visible_offsets[j],
                                  c.visible + c.visible_offsets[j + 1],
                                  c.visible + c.visible_offsets[i]);
    if (nests)
      chains_.back().second = i + 1;
    else
      chains_.emplace_back(i, i + 1);
  }
  const int64_t base = static_cast<int64_t>(chains_.size()) * n_groups;
  const int64_t want = 2 * static_cast<int64_t>(pool_.size());
  const int64_t min_parts = pool_.size() > 1 ? (want + base - 1) / base : 1;
  tasks_.clear();
  for (const auto& [b, e] : chains_) {
    const int64_t rows = e - b;
    const int64_t by_size = (rows + max_rows - 1) / max_rows;
    const int64_t parts = std::min(rows, std::max(min_parts, by_size));
    const int64_t chunk = (rows + parts - 1) / parts;
    for (int64_t p = 0; p < parts; ++p) {
      AttentionTask t;
      if (by_size >= min_parts) {  // contiguous rows: all of them live for most of the pass
        t.first = b + p * chunk;
        t.step = 1;
        t.count = std::min(chunk, e - t.first);
      } else {  // interleaved rows: the parts of a short block cost the same
        t.first = b + p;
        t.step = parts;
        t.count = (rows - p + parts - 1) / parts;
      }
      if (t.count <= 0) continue;
      int64_t positions = 0;
      for (int64_t k = 0; k < t.count; ++k) {
        const int64_t i = t.first + k * t.step;
        positions += c.prefix_len[i] + extras(i);
      }
      for (int64_t g = 0; g < n_groups; ++g) {
        t.group = g;
        t.nh = static_cast<int32_t>(group_heads_[static_cast<size_t>(g)].size());
        t.cost = positions * t.nh;
        tasks_.push_back(t);
      }
    }
  }
  split_lone_rows_by_heads(want);
  std::sort(tasks_.begin(), tasks_.end(), [](const AttentionTask& x, const AttentionTask& y) {
    if (x.cost != y.cost) return x.cost > y.cost;
    if (x.first != y.first) return x.first < y.first;
    return x.group != y.group ? x.group < y.group : x.h0 < y.h0;
  });
}

// When there are fewer tasks than `want` (two per thread), each lone row's task is split into
// parts of its query heads: a decoded token of SmolLM2 has 3 KV heads, so 3 tasks on 2 threads,
// one of which ran two.
void CpuBackend::split_lone_rows_by_heads(int64_t want) {
  const auto n = static_cast<int64_t>(tasks_.size());
  if (pool_.size() == 1 || n == 0 || n >= want) return;
  const int64_t per_task = (want + n - 1) / n;
  split_tasks_.clear();
  for (const AttentionTask& whole : tasks_) {
    const auto splits =
        static_cast<int32_t>(whole.count == 1 ? std::min<int64_t>(whole.nh, per_task) : 1);
    const int64_t positions = whole.cost / whole.nh;
    for (int32_t part = 0; part < splits; ++part) {
      AttentionTask t = whole;
      t.h0 = whole.h0 + part * whole.nh / splits;
      t.nh = whole.h0 + (part + 1) * whole.nh / splits - t.h0;
      t.cost = positions * t.nh;
      split_tasks_.push_back(t);
    }
  }
  tasks_.swap(split_tasks_);
}

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(const CpuBackendOptions& opts) {
  SSD_CHECK(opts.threads >= 1 && opts.threads <= 1024, "--threads {} must be between 1 and 1024",
            opts.threads);
  return std::make_unique<CpuBackend>(opts);
}

std::unique_ptr<Backend> make_cpu_backend(int threads) {
  return make_cpu_backend(CpuBackendOptions{.threads = threads});
}

// The defaults of Backend's exchanges and fused ops (defined here, the one engine file every
// backend links).
void Backend::allreduce_sum(Collective& comm, float* y, int64_t count, float* scratch) {
  (void)scratch;
  std::vector<float> host(static_cast<size_t>(count));
  download(host.data(), y, host.size() * sizeof(float));
  comm.allreduce_sum(host.data(), count);
  upload(y, host.data(), host.size() * sizeof(float));
}

void Backend::gather_columns(Collective& comm, const float* local, int64_t rows,
                             const std::vector<int64_t>& off, float* out, float* scratch) {
  (void)scratch;
  const int me = comm.rank();
  std::vector<float> in(static_cast<size_t>(rows * (off[me + 1] - off[me])));
  std::vector<float> whole(static_cast<size_t>(rows * off.back())), blocks;
  download(in.data(), local, in.size() * sizeof(float));
  ssd::gather_columns(comm, in.data(), rows, off, blocks, whole.data());
  upload(out, whole.data(), whole.size() * sizeof(float));
}

void Backend::domino_walk(const DominoWalkCall& call) {
  (void)call;
  SSD_CHECK(false, "backend {} has no fused Domino walk (check has_domino_walk() first)", name());
}

}  // namespace ssd
