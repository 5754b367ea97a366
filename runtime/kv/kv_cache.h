// Paged key/value cache shared by every sequence of one model instance.
//
// Storage is a pool of pages of `page_tokens` positions; a page holds, for every layer, K and V of
// shape [page_tokens, n_kv_heads, head_dim] (float32). A sequence is a page table plus a length.
// This gives the three operations speculative decoding needs without copying the shared prefix:
//   - truncate(seq, n): drop rejected draft positions (pages past the end go back to the pool);
//   - fork(seq): a new sequence sharing all of seq's pages (reference counted); the first write
//     into a shared page copies that one page (copy on write), so branches of a speculation tree
//     share their verified prefix;
//   - compact(seq, start, keep): after tree verification, move the accepted path's entries to
//     consecutive positions and drop the rest.
// Memory is reserved page by page as sequences grow, up to `max_tokens` positions in total, in
// huge pages where the system gives them (runtime/core/huge_page_arena.h: attention reads every
// cached position's K and V each step, 46 KB a position for the default model).
//
// Device mirrors: a device backend (kernels/cuda) keeps its own copy of every page, indexed by
// the same page ids, and reads this object's page tables. The cache's own data moves (the copy
// of a shared page on first write, compact()'s position moves) are reported to a KvPageObserver
// so the mirror repeats them on the device; with no observer (the CPU path) it is one null test.
// A mirror belongs to one cache object, not to an address: every cache has an id() never given
// to another cache of the process (a new cache allocated where a freed one lived gets a new id),
// and a dying cache tells its observer (cache_destroyed), so a device backend drops the mirror
// (runtime/backend/cuda/kv_mirrors.h) instead of handing its stale pages to the next cache.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "runtime/core/huge_page_arena.h"

namespace ssd {

using SeqId = int32_t;

struct KvCacheConfig {
  int64_t n_layers = 0;
  int64_t n_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t page_tokens = 16;
  int64_t max_tokens = 0;  // capacity in positions over all pages
};

// Told of the data moves the cache makes on its own (see the top of the file). Page ids are
// those of SeqView::pages; a slot is a position within its page (pos % page_tokens).
class KvCache;

class KvPageObserver {
 public:
  virtual ~KvPageObserver() = default;
  // Page dst became a copy of page src (every layer, K and V).
  virtual void page_copied(int32_t src, int32_t dst) = 0;
  // Slot src_slot of src_page was copied to dst_slot of dst_page (every layer, K and V).
  virtual void slot_copied(int32_t src_page, int64_t src_slot, int32_t dst_page,
                           int64_t dst_slot) = 0;
  // The cache is being destroyed (called from its destructor, once): the observer must not
  // touch it afterwards, not even to detach.
  virtual void cache_destroyed(const KvCache& cache) noexcept { (void)cache; }
};

class KvCache {
 public:
  explicit KvCache(const KvCacheConfig& cfg);
  ~KvCache();  // tells the observer (cache_destroyed)
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;

  const KvCacheConfig& config() const { return cfg_; }
  // Unique among every KvCache this process ever created (starts at 1; never reused).
  uint64_t id() const { return id_; }

  SeqId create();
  SeqId fork(SeqId src);  // shares src's pages; O(pages), no K/V copied
  void release(SeqId seq);
  bool alive(SeqId seq) const;

  int64_t length(SeqId seq) const;
  // Appends n positions (uninitialised until written); returns the first new position. Throws
  // ssd::Error when the cache is full.
  int64_t grow(SeqId seq, int64_t n);
  void truncate(SeqId seq, int64_t new_length);
  // Positions start + keep[i] move to start + i (keep strictly increasing, all >= 0, within the
  // sequence), then the sequence is truncated to start + keep.size().
  void compact(SeqId seq, int64_t start, std::span<const int32_t> keep);

  // K or V of one position of one layer: [n_kv_heads, head_dim]. The writable variants make the
  // page private first (copy on write).
  const float* key(int64_t layer, SeqId seq, int64_t pos) const;
  const float* value(int64_t layer, SeqId seq, int64_t pos) const;
  float* key_mut(int64_t layer, SeqId seq, int64_t pos);
  float* value_mut(int64_t layer, SeqId seq, int64_t pos);

  // Read access for attention kernels without per-position checks: a snapshot of one sequence's
  // page table, valid until that sequence is next modified.
  struct SeqView {
    const KvCache* cache;
    const int32_t* pages;
    int64_t length;
    const float* key(int64_t layer, int64_t pos) const {
      return cache->slot_ptr(pages[pos / cache->cfg_.page_tokens], layer, pos);
    }
    const float* value(int64_t layer, int64_t pos) const { return key(layer, pos) + cache->v_offset_; }
  };
  SeqView view(SeqId seq) const;

  int64_t pages_in_use() const;
  // The most pages the cache can ever hold (page ids are below this).
  int64_t max_pages() const { return (cfg_.max_tokens + cfg_.page_tokens - 1) / cfg_.page_tokens; }
  // One observer at a time (null to detach); it must outlive its registration.
  void set_page_observer(KvPageObserver* o) { observer_ = o; }
  KvPageObserver* page_observer() const { return observer_; }
  int64_t capacity_tokens() const { return cfg_.max_tokens; }

 private:
  struct Seq {
    bool alive = false;
    int64_t length = 0;
    std::vector<int32_t> pages;  // page ids, pages.size() == ceil(length / page_tokens)
  };
  float* page_ptr(int32_t page) const { return pages_[page]; }
  // K of (layer, pos) inside `page`; V is v_offset_ floats further.
  float* slot_ptr(int32_t page, int64_t layer, int64_t pos) const {
    return page_ptr(page) + layer * layer_stride_ + (pos % cfg_.page_tokens) * row_floats_;
  }
  int32_t alloc_page();
  void unref_page(int32_t page);
  int32_t make_private(Seq& s, int64_t page_index);
  Seq& seq_ref(SeqId id);
  const Seq& seq_ref(SeqId id) const;

  KvCacheConfig cfg_;
  uint64_t id_ = 0;
  size_t row_floats_ = 0;    // n_kv_heads * head_dim: one position of K (or V) of one layer
  size_t v_offset_ = 0;      // page_tokens * row_floats_: V block follows the K block of a layer
  size_t layer_stride_ = 0;  // 2 * v_offset_: floats per layer inside a page
  size_t page_floats_ = 0;   // n_layers * layer_stride_
  HugePageArena arena_;        // the pages' memory, unmapped with the cache
  std::vector<float*> pages_;  // [page id] its n_layers x 2 x page_tokens x row_floats floats
  std::vector<int32_t> refcount_;
  std::vector<int32_t> free_pages_;
  std::vector<Seq> seqs_;
  KvPageObserver* observer_ = nullptr;
};

}  // namespace ssd
