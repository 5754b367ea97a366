// CudaBackend (cuda_backend_impl.h): writing and reading the KV cache on the device.
// store_kv makes the host cache do its bookkeeping (copy on write: the mirror repeats the page
// copies on the device, device_kv.h) and scatters the new K/V rows into the mirror's pool;
// attention flattens the call for the device (each distinct sequence's page table once, each
// query's prefix and visible range) and launches kernels/cuda/attention.cu over the pool, split
// over chunks of positions (flash-decoding) with its partials in attn_partials_.
// Compiled here against CUDA 13 (no GPU on the build machine): not yet run on a device.
#include <map>

#include "kernels/common/softmax_math.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/kernels.cuh"
#include "runtime/backend/cuda/cuda_backend_impl.h"
#include "runtime/core/error.h"

namespace ssd::cuda {

DeviceKv& CudaBackend::mirror(KvCache& cache) {
  bool created = false;
  DeviceKv& m = kv_.get(cache, &created, opts_.device, stream_);
  if (created) ++epoch_;  // new pool addresses (see enter())
  return m;
}

void CudaBackend::store_kv(KvCache& cache, int64_t layer, const SeqId* seqs,
                           const int64_t* cache_pos, const float* k, const float* v, int64_t n) {
  enter();
  DeviceKv& dkv = mirror(cache);
  const int64_t row = cache.config().n_kv_heads * cache.config().head_dim;
  k_off_.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    cache.key_mut(layer, seqs[i], cache_pos[i]);  // copy on write: the observer copies pages
    const KvCache::SeqView sv = cache.view(seqs[i]);
    const int64_t pt = cache.config().page_tokens;
    k_off_[i] = dkv.k_offset(layer, sv.pages[cache_pos[i] / pt], cache_pos[i] % pt);
  }
  const int64_t* doff = staging_->in(k_off_.data(), k_off_.size());
  const float* dk = staging_->in(k, static_cast<size_t>(n * row));
  const float* dv = staging_->in(v, static_cast<size_t>(n * row));
  if (live())
    launch_store_kv(const_cast<float*>(dkv.geometry().pool), doff, dkv.geometry().v_offset, dk, dv,
                    n, row, stream_);
  staging_->finish();
}

void CudaBackend::attention(const AttentionCall& c) {
  enter();
  SSD_CHECK(c.n >= 0 && c.n_heads > 0 && c.n_kv_heads > 0 && c.head_dim > 0,
            "attention: bad shape n={} heads={} kv_heads={} head_dim={}", c.n, c.n_heads,
            c.n_kv_heads, c.head_dim);
  SSD_CHECK(c.head_dim <= kMaxHeadDim, "cuda attention: head_dim {} exceeds {}", c.head_dim,
            kMaxHeadDim);
  const KvCacheConfig& cc = c.cache->config();
  SSD_CHECK(c.n_kv_heads == cc.n_kv_heads && c.head_dim == cc.head_dim,
            "attention: call has {} KV heads x {} but the cache holds {} x {}", c.n_kv_heads,
            c.head_dim, cc.n_kv_heads, cc.head_dim);
  SSD_CHECK(c.kv_head_of || c.n_heads % c.n_kv_heads == 0,
            "attention: {} query heads do not group evenly over {} KV heads (give kv_head_of)",
            c.n_heads, c.n_kv_heads);
  const DeviceKv* dkv = kv_.find(*c.cache);
  SSD_CHECK(dkv, "cuda attention: the KV cache was never written on this backend");
  // Split-K scratch (attention.cu): chunks bounded by the cache's capacity, not the current
  // lengths, so the launch a graph captured stays right as the contexts grow. Grown outside
  // graphs only: the eager measuring run of a region grows it (and moves the epoch) before its
  // capture.
  const int64_t max_chunks = kernels::hd::attention_chunks(dkv->max_pages() * cc.page_tokens + c.n);
  const size_t part_bytes =
      static_cast<size_t>(attention_partial_floats(c.n, c.n_heads, c.head_dim, max_chunks)) *
      sizeof(float);
  if (attn_partials_.bytes() < part_bytes) {
    SSD_CHECK(region_ != Region::Capture && region_ != Region::Replay,
              "cuda attention: its split-K scratch would grow inside a captured region");
    SSD_CUDA_CHECK(cudaStreamSynchronize(stream_));  // queued kernels may read the old one
    attn_partials_.grow(part_bytes);
    ++epoch_;  // graphs captured before read the old address
  }
  // Flatten: each distinct sequence's page table once, each query's prefix and visible range.
  tables_.clear();
  queries_.assign(static_cast<size_t>(c.n), QueryDesc{});
  std::map<SeqId, int64_t> table_of;
  for (int64_t i = 0; i < c.n; ++i) {
    auto [t, fresh] = table_of.emplace(c.seqs[i], static_cast<int64_t>(tables_.size()));
    if (fresh) {
      const KvCache::SeqView sv = c.cache->view(c.seqs[i]);
      const int64_t pages = (sv.length + cc.page_tokens - 1) / cc.page_tokens;
      tables_.insert(tables_.end(), sv.pages, sv.pages + pages);
    }
    QueryDesc& q = queries_[i];
    q.page_table = t->second;
    q.prefix = c.prefix_len[i];
    q.visible = c.visible_offsets[i];
    q.n_visible = c.visible_offsets[i + 1] - c.visible_offsets[i];
  }
  const int64_t n_vis = c.n > 0 ? c.visible_offsets[c.n] : 0;
  const size_t qf = static_cast<size_t>(c.n * c.n_heads * c.head_dim);
  const float* dq = staging_->in(c.q, qf);
  float* dout = staging_->out(c.out, qf);
  // Region slots sized by the key, not the contents: at most n page tables of at most max_pages
  // pages, at most n visible positions per query.
  const int32_t* dtab =
      staging_->in(tables_.data(), tables_.size(), static_cast<size_t>(c.n * dkv->max_pages()));
  const QueryDesc* dqd = staging_->in(queries_.data(), queries_.size());
  const int64_t* dvis =
      staging_->in(c.visible, static_cast<size_t>(n_vis), static_cast<size_t>(c.n * c.n));
  const int32_t* dhead = staging_->in(c.kv_head_of, c.kv_head_of ? c.n_heads : 0);
  if (live())
    launch_attention(dq, dout, c.n, c.n_heads, c.n_kv_heads, c.head_dim, dhead, c.layer, c.scale,
                     dkv->geometry(), dtab, dqd, dvis, max_chunks, attn_partials_.get<float>(),
                     stream_);
  staging_->finish();
}

}  // namespace ssd::cuda
