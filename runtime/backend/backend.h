// The compute interface the transformer is written against. A backend executes the transformer's
// ops on its device; the model code never knows which one it runs on. The CPU backend is the
// reference (and runs everything here); the CUDA backend implements the same calls on device
// memory. All activations are float32, laid out row-major with the shapes given per call.
//
// Activation memory belongs to the backend (allocate(): host memory on the CPU, device memory on
// a GPU), and the transformer keeps its residual stream and scratch there, so a forward on a
// device never leaves it. Moving bytes between the host and backend memory is always an explicit
// call (upload / download / copy) so the model code shows where it pays for a transfer; on the
// CPU backend they are plain copies, so its results are the same bits as when the activations
// were host vectors. Ops still accept host pointers too (the CUDA backend stages those), which is
// how small host inputs (positions, norm gains, page tables) reach them.
//
// Weights enter through prepare_weight(): the CPU backend repacks block-quantized ones for its
// integer matmul and copies the others into huge pages; a device backend uploads (and may
// repack) once at start-up. Either way the bytes given are read then, never again. After that, a forward is only these ops.
#pragma once

#include <compare>
#include <cstdint>
#include <memory>
#include <vector>

#include "runtime/backend/backend_buffer.h"
#include "runtime/backend/domino_walk_call.h"
#include "runtime/backend/rope_layout.h"
#include "runtime/backend/weight.h"
#include "runtime/io/tensor_ref.h"
#include "runtime/kv/kv_cache.h"
#include "runtime/parallel/collective.h"

namespace ssd {

// One attention op over a batch of queries against the paged KV cache. Query i belongs to
// sequence seqs[i]; it sees that sequence's positions [0, prefix_len[i]) and the positions
// visible[visible_offsets[i] .. visible_offsets[i+1]) (cache positions of the batch's own tokens
// that the mask lets it see, K/V already written).
struct AttentionCall {
  const float* q = nullptr;  // [n, n_heads, head_dim], RoPE applied
  float* out = nullptr;      // [n, n_heads, head_dim]
  int64_t n = 0;
  int64_t n_heads = 0;
  int64_t n_kv_heads = 0;
  int64_t head_dim = 0;
  // Cache KV head read by each query head: [n_heads], values < n_kv_heads. Null means the usual
  // GQA grouping h / (n_heads / n_kv_heads). A tensor-parallel rank holding an uneven share of
  // heads maps its local query heads onto the KV heads it holds (runtime/parallel/tp_plan.h).
  const int32_t* kv_head_of = nullptr;
  int64_t layer = 0;
  float scale = 1.0f;
  const KvCache* cache = nullptr;
  const SeqId* seqs = nullptr;              // [n]
  const int64_t* prefix_len = nullptr;      // [n]
  const int64_t* visible = nullptr;         // concatenated cache positions
  const int64_t* visible_offsets = nullptr; // [n + 1]
};

// What identifies the device work of one forward for replay (Backend::begin_replayable): the
// same model on the same KV cache with the same batch size and logits rows enqueues the same
// ops on the same buffers with the same shapes; only the contents of its host inputs change.
struct ReplayKey {
  const void* owner = nullptr;  // the model running the forward
  const void* cache = nullptr;  // the KV cache it writes
  int64_t n = 0;                // batch rows
  std::vector<int32_t> rows;    // the rows whose logits are computed, in order
  std::vector<int32_t> hidden;  // the layers whose hidden states are kept, in order
  std::vector<int32_t> layout;  // anything else that shapes the owner's ops (a Domino backbone
                                // pass: each block's known rows and wanted outputs)
  // A tensor-parallel forward's group (null: no exchanges). Its ranks replay together or not at
  // all: a backend that records exchanges (CUDA graphs with NCCL inside) makes every rank of the
  // group agree, at begin_replayable, on whether this forward runs eagerly, is captured or is
  // replayed, because NCCL needs a captured collective to be captured on every rank.
  Collective* group = nullptr;
  auto operator<=>(const ReplayKey&) const = default;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;
  virtual int threads() const = 0;

  // At least `bytes` of this backend's memory (zeroed), for activations and scratch.
  virtual BackendBuffer allocate(size_t bytes) = 0;
  // dst (backend memory) <- src (host), `bytes` bytes. May return before the copy is done on a
  // device, but src may be reused at once.
  virtual void upload(void* dst, const void* src, size_t bytes) = 0;
  // dst (host) <- src (backend memory); returns when the bytes are on the host (on a device this
  // waits for every op before it: the one synchronisation a forward needs).
  virtual void download(void* dst, const void* src, size_t bytes) = 0;
  // dst <- src, both backend memory, in order with the ops.
  virtual void copy(void* dst, const void* src, size_t bytes) = 0;

  // A replayable region: the ops of one forward between begin_replayable and end_replayable
  // depend only on `key` (see ReplayKey) and on their host inputs' contents, write only backend
  // memory, and neither allocate nor download; they exchange only through allreduce_sum /
  // gather_columns below, and only when exchanges_replayable() says the backend records them.
  // A backend may record them the first times and replay the recording afterwards (the CUDA
  // backend: CUDA graphs), running only the ops' host parts; their results are those of the ops
  // run one by one. abort_replayable ends a region that failed (never throws). The CPU backend
  // runs the ops as they come (no-ops).
  virtual void begin_replayable(const ReplayKey& key) { (void)key; }
  virtual void end_replayable() {}
  virtual void abort_replayable() noexcept {}

  // A weight matrix (ne = {cols, rows}) ready for matmul on this backend.
  virtual Weight prepare_weight(const TensorRef& t) = 0;

  // y[n, rows] = x[n, cols] * W^T
  virtual void matmul(const Weight& w, const float* x, float* y, int64_t n) = 0;
  // out[i, :] = row tokens[i] of table (decoded to float).   out: [n, cols]
  virtual void embed(const Weight& table, const int32_t* tokens, int64_t n,
                     float* out) = 0;
  // y[r, :] = rmsnorm(x[r, :]) * g.   x, y: [rows, dim]
  virtual void rmsnorm(const float* x, const float* g, float* y, int64_t rows, int64_t dim,
                       float eps) = 0;
  // In place on x: [n, n_heads, head_dim] at positions[n].
  virtual void rope(float* x, int64_t n, int64_t n_heads, int64_t head_dim, int64_t rot_dim,
                    const int32_t* positions, const float* inv_freq,
                    RopeLayout layout) = 0;
  // Writes K and V of n tokens into the cache: token i at (layer, seqs[i], cache_pos[i]).
  // k, v: [n, n_kv_heads * head_dim]
  virtual void store_kv(KvCache& cache, int64_t layer, const SeqId* seqs, const int64_t* cache_pos,
                        const float* k, const float* v, int64_t n) = 0;
  virtual void attention(const AttentionCall& call) = 0;
  // out[i] = silu(gate[i]) * up[i]
  virtual void swiglu(const float* gate, const float* up, float* out, int64_t count) = 0;
  // y[i] += x[i]
  virtual void add(float* y, const float* x, int64_t count) = 0;
  // y[r, :] += b   for r < rows.   y: [rows, cols]
  virtual void add_bias(float* y, const float* b, int64_t rows, int64_t cols) = 0;

  // Tensor-parallel exchanges on backend memory: collectives of `comm`'s group (every rank makes
  // the same call in the same order), with runtime/parallel/collective.h's results and bits.
  //   allreduce_sum   y[i] = the group's sum of y[i], in rank order.   y: [count]
  //                   scratch: [comm.size() * count] backend memory
  //   gather_columns  out = the [rows, off.back()] matrix whose columns [off[r], off[r+1]) are
  //                   rank r's `local` [rows, off[r+1] - off[r]] (runtime/parallel/
  //                   gather_columns.h).   scratch: [rows * off.back()] backend memory
  // The defaults download, exchange through the Collective's host interface, and upload. The
  // CPU backend hands its (host) memory to the Collective directly. A backend whose memory the
  // group's transport moves itself (runtime/parallel/stream_collective.h: the CUDA backend with
  // NCCL) enqueues the exchange in order with its ops, finishing it on the device in `scratch`,
  // and says so with exchanges_replayable(): then a forward with exchanges may be a region.
  virtual void allreduce_sum(Collective& comm, float* y, int64_t count, float* scratch);
  virtual void gather_columns(Collective& comm, const float* local, int64_t rows,
                              const std::vector<int64_t>& off, float* out, float* scratch);
  virtual bool exchanges_replayable(Collective& comm) {
    (void)comm;
    return false;
  }
  // Waits until the exchanges enqueued so far have finished, under the transport's watchdog (a
  // dead peer ends the job instead of hanging). download() does this by itself; a forward that
  // leaves its results in backend memory calls it, so that whatever reads them next (a device
  // token picker's own synchronisation) cannot hang on a peer. Nothing to do by default.
  virtual void wait_exchanges() {}

  // Fused ops: a whole multi-op loop as one device launch where a backend has the kernel
  // (has_*() says so); callers run the op-by-op path otherwise. The CPU backend has none.
  // The Domino head's walk over whole blocks, greedy or sampled (domino_walk_call.h); returns
  // when the tokens (and sampled rows' q lists) are on the host. Throws on a backend without it.
  virtual bool has_domino_walk() const { return false; }
  virtual void domino_walk(const DominoWalkCall& call);
};

// buf holds at least `count` floats of be's memory (regrown, contents lost, when smaller).
inline void reserve_floats(Backend& be, BackendBuffer& buf, int64_t count) {
  const size_t bytes = static_cast<size_t>(count > 0 ? count : 1) * sizeof(float);
  if (buf.bytes() < bytes) buf = be.allocate(bytes);
}

// A replayable region (see Backend::begin_replayable) that aborts itself unless end() is called.
class ReplayableRegion {
 public:
  ReplayableRegion(Backend& be, const ReplayKey& key) : be_(be) { be_.begin_replayable(key); }
  ~ReplayableRegion() {
    if (open_) be_.abort_replayable();
  }
  ReplayableRegion(const ReplayableRegion&) = delete;
  ReplayableRegion& operator=(const ReplayableRegion&) = delete;
  void end() {
    open_ = false;
    be_.end_replayable();
  }

 private:
  Backend& be_;
  bool open_ = true;
};

// The CPU backend with `threads` workers (>= 1).
std::unique_ptr<Backend> make_cpu_backend(int threads);

}  // namespace ssd
