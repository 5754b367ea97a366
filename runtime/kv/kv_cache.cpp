#include "runtime/kv/kv_cache.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "runtime/core/error.h"

namespace ssd {

namespace {
std::atomic<uint64_t> g_next_cache_id{1};
}  // namespace

KvCache::KvCache(const KvCacheConfig& cfg)
    : cfg_(cfg), id_(g_next_cache_id.fetch_add(1, std::memory_order_relaxed)) {
  SSD_CHECK(cfg.n_layers > 0 && cfg.n_kv_heads > 0 && cfg.head_dim > 0 && cfg.page_tokens > 0,
            "KV cache: layers {}, kv heads {}, head dim {} and page size {} must be positive",
            cfg.n_layers, cfg.n_kv_heads, cfg.head_dim, cfg.page_tokens);
  SSD_CHECK(cfg.max_tokens > 0, "KV cache: capacity {} must be positive", cfg.max_tokens);
  row_floats_ = static_cast<size_t>(cfg.n_kv_heads * cfg.head_dim);
  v_offset_ = static_cast<size_t>(cfg.page_tokens) * row_floats_;
  layer_stride_ = 2 * v_offset_;
  page_floats_ = static_cast<size_t>(cfg.n_layers) * layer_stride_;
}

KvCache::~KvCache() {
  if (observer_) observer_->cache_destroyed(*this);
}

int32_t KvCache::alloc_page() {
  if (!free_pages_.empty()) {
    int32_t p = free_pages_.back();
    free_pages_.pop_back();
    refcount_[p] = 1;
    return p;
  }
  const int64_t max_pages = (cfg_.max_tokens + cfg_.page_tokens - 1) / cfg_.page_tokens;
  SSD_CHECK(static_cast<int64_t>(pages_.size()) < max_pages,
            "KV cache full: all {} positions ({} pages of {}) are in use; raise --ctx-size",
            cfg_.max_tokens, max_pages, cfg_.page_tokens);
  // Zeroed: an arena block is never handed out twice.
  pages_.push_back(reinterpret_cast<float*>(arena_.allocate(page_floats_ * sizeof(float))));
  refcount_.push_back(1);
  return static_cast<int32_t>(pages_.size() - 1);
}

void KvCache::unref_page(int32_t page) {
  SSD_ASSERT(refcount_[page] > 0);
  if (--refcount_[page] == 0) free_pages_.push_back(page);
}

KvCache::Seq& KvCache::seq_ref(SeqId id) {
  SSD_CHECK(id >= 0 && id < static_cast<SeqId>(seqs_.size()) && seqs_[id].alive,
            "KV cache: sequence {} does not exist", id);
  return seqs_[id];
}
const KvCache::Seq& KvCache::seq_ref(SeqId id) const {
  SSD_CHECK(id >= 0 && id < static_cast<SeqId>(seqs_.size()) && seqs_[id].alive,
            "KV cache: sequence {} does not exist", id);
  return seqs_[id];
}

SeqId KvCache::create() {
  for (size_t i = 0; i < seqs_.size(); ++i) {
    if (!seqs_[i].alive) {
      seqs_[i] = Seq{true, 0, {}};
      return static_cast<SeqId>(i);
    }
  }
  seqs_.push_back(Seq{true, 0, {}});
  return static_cast<SeqId>(seqs_.size() - 1);
}

SeqId KvCache::fork(SeqId src) {
  Seq copy = seq_ref(src);  // page table copy only
  for (int32_t p : copy.pages) refcount_[p]++;
  SeqId id = create();
  seqs_[id] = std::move(copy);
  return id;
}

void KvCache::release(SeqId id) {
  Seq& s = seq_ref(id);
  for (int32_t p : s.pages) unref_page(p);
  s = Seq{};
}

bool KvCache::alive(SeqId id) const {
  return id >= 0 && id < static_cast<SeqId>(seqs_.size()) && seqs_[id].alive;
}

int64_t KvCache::length(SeqId id) const { return seq_ref(id).length; }

int64_t KvCache::grow(SeqId id, int64_t n) {
  SSD_CHECK(n >= 0, "KV cache: cannot grow by {}", n);
  Seq& s = seq_ref(id);
  const int64_t first = s.length;
  const int64_t new_len = s.length + n;
  const size_t need = static_cast<size_t>((new_len + cfg_.page_tokens - 1) / cfg_.page_tokens);
  while (s.pages.size() < need) s.pages.push_back(alloc_page());
  s.length = new_len;
  return first;
}

void KvCache::truncate(SeqId id, int64_t new_length) {
  Seq& s = seq_ref(id);
  SSD_CHECK(new_length >= 0 && new_length <= s.length,
            "KV cache: cannot truncate sequence {} of length {} to {}", id, s.length, new_length);
  const size_t need = static_cast<size_t>((new_length + cfg_.page_tokens - 1) / cfg_.page_tokens);
  while (s.pages.size() > need) {
    unref_page(s.pages.back());
    s.pages.pop_back();
  }
  s.length = new_length;
}

int32_t KvCache::make_private(Seq& s, int64_t page_index) {
  int32_t& p = s.pages[page_index];
  if (refcount_[p] > 1) {
    const int32_t fresh = alloc_page();
    std::memcpy(page_ptr(fresh), page_ptr(p), page_floats_ * sizeof(float));
    if (observer_) observer_->page_copied(p, fresh);
    unref_page(p);
    p = fresh;
  }
  return p;
}

void KvCache::compact(SeqId id, int64_t start, std::span<const int32_t> keep) {
  Seq& s = seq_ref(id);
  SSD_CHECK(start >= 0 && start + static_cast<int64_t>(keep.size()) <= s.length,
            "KV cache: compact range [{}, {}) exceeds sequence length {}", start,
            start + keep.size(), s.length);
  for (size_t i = 0; i < keep.size(); ++i) {
    SSD_CHECK(keep[i] >= static_cast<int32_t>(i) && start + keep[i] < s.length &&
                  (i == 0 || keep[i] > keep[i - 1]),
              "KV cache: compact index {} = {} is not strictly increasing within the sequence", i,
              keep[i]);
  }
  const size_t row = static_cast<size_t>(cfg_.n_kv_heads * cfg_.head_dim);
  for (size_t i = 0; i < keep.size(); ++i) {
    if (keep[i] == static_cast<int32_t>(i)) continue;
    const int64_t dst = start + i, src = start + keep[i];
    for (int64_t l = 0; l < cfg_.n_layers; ++l) {
      // Source read before the destination page is made private: both may share a page.
      std::memmove(key_mut(l, id, dst), key(l, id, src), row * sizeof(float));
      std::memmove(value_mut(l, id, dst), value(l, id, src), row * sizeof(float));
    }
    if (observer_) {  // dst's page is private by now (key_mut above)
      const Seq& sq = seqs_[id];
      observer_->slot_copied(sq.pages[src / cfg_.page_tokens], src % cfg_.page_tokens,
                             sq.pages[dst / cfg_.page_tokens], dst % cfg_.page_tokens);
    }
  }
  truncate(id, start + static_cast<int64_t>(keep.size()));
}

const float* KvCache::key(int64_t layer, SeqId id, int64_t pos) const {
  const Seq& s = seq_ref(id);
  SSD_ASSERT(pos >= 0 && pos < s.length && layer >= 0 && layer < cfg_.n_layers);
  return slot_ptr(s.pages[pos / cfg_.page_tokens], layer, pos);
}

const float* KvCache::value(int64_t layer, SeqId id, int64_t pos) const {
  return key(layer, id, pos) + v_offset_;
}

float* KvCache::key_mut(int64_t layer, SeqId id, int64_t pos) {
  Seq& s = seq_ref(id);
  SSD_ASSERT(pos >= 0 && pos < s.length && layer >= 0 && layer < cfg_.n_layers);
  return slot_ptr(make_private(s, pos / cfg_.page_tokens), layer, pos);
}

float* KvCache::value_mut(int64_t layer, SeqId id, int64_t pos) {
  return key_mut(layer, id, pos) + v_offset_;
}

KvCache::SeqView KvCache::view(SeqId id) const {
  const Seq& s = seq_ref(id);
  return SeqView{this, s.pages.data(), s.length};
}

int64_t KvCache::pages_in_use() const {
  return static_cast<int64_t>(pages_.size() - free_pages_.size());
}

}  // namespace ssd
