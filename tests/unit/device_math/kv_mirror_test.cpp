// The device KV mirror's bookkeeping, on the host: a mirror that keeps its own copy of every page
// (by page id, like kernels/cuda's DeviceKv) and learns of the cache's own data moves only
// through KvPageObserver, written to exactly as CudaBackend::store_kv writes (resolve the slot
// with key_mut, then write the mirror's page at that id). After forks, copy-on-write writes,
// compaction, truncation and page reuse, every visible K/V row of every sequence must read the
// same from the mirror as from the cache. Exact comparison: only copies are involved.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "runtime/kv/kv_cache.h"

namespace ssd {
namespace {

class HostMirror final : public KvPageObserver {
 public:
  explicit HostMirror(KvCache& c) : cache_(c) {
    const KvCacheConfig& k = c.config();
    row_ = k.n_kv_heads * k.head_dim;
    v_off_ = k.page_tokens * row_;
    layer_stride_ = 2 * v_off_;
    page_floats_ = k.n_layers * layer_stride_;
    pool_.assign(static_cast<size_t>(c.max_pages() * page_floats_), -1.0f);
    c.set_page_observer(this);
  }
  ~HostMirror() override { cache_.set_page_observer(nullptr); }

  void page_copied(int32_t src, int32_t dst) override {
    ++page_copies;
    std::copy_n(pool_.begin() + src * page_floats_, page_floats_,
                pool_.begin() + dst * page_floats_);
  }
  void slot_copied(int32_t sp, int64_t ss, int32_t dp, int64_t ds) override {
    ++slot_copies;
    for (int64_t l = 0; l < cache_.config().n_layers; ++l)
      for (int64_t kv = 0; kv < 2; ++kv) {
        const int64_t off = l * layer_stride_ + kv * v_off_;
        std::copy_n(pool_.begin() + sp * page_floats_ + off + ss * row_, row_,
                    pool_.begin() + dp * page_floats_ + off + ds * row_);
      }
  }

  // CudaBackend::store_kv's order: key_mut (may copy the page), then the id, then the write.
  void store(int64_t layer, SeqId seq, int64_t pos, float val) {
    float* k = cache_.key_mut(layer, seq, pos);
    float* v = cache_.value_mut(layer, seq, pos);
    const int64_t pt = cache_.config().page_tokens;
    const int32_t page = cache_.view(seq).pages[pos / pt];
    float* mk = slot(page, layer, pos % pt);
    for (int64_t i = 0; i < row_; ++i) {
      k[i] = mk[i] = val + static_cast<float>(i);
      v[i] = mk[v_off_ + i] = -val - static_cast<float>(i);
    }
  }

  void expect_same(SeqId seq) const {
    const KvCache::SeqView sv = cache_.view(seq);
    const int64_t pt = cache_.config().page_tokens;
    for (int64_t l = 0; l < cache_.config().n_layers; ++l)
      for (int64_t p = 0; p < sv.length; ++p) {
        const float* mk = const_cast<HostMirror*>(this)->slot(sv.pages[p / pt], l, p % pt);
        for (int64_t i = 0; i < row_; ++i) {
          ASSERT_EQ(mk[i], sv.key(l, p)[i]) << "seq " << seq << " layer " << l << " pos " << p;
          ASSERT_EQ(mk[v_off_ + i], sv.value(l, p)[i]) << "seq " << seq << " pos " << p;
        }
      }
  }

  int page_copies = 0, slot_copies = 0;

 private:
  float* slot(int32_t page, int64_t layer, int64_t s) {
    return pool_.data() + page * page_floats_ + layer * layer_stride_ + s * row_;
  }
  KvCache& cache_;
  int64_t row_ = 0, v_off_ = 0, layer_stride_ = 0, page_floats_ = 0;
  std::vector<float> pool_;
};

TEST(KvMirror, FollowsForksCopyOnWriteCompactionAndReuse) {
  KvCache cache(KvCacheConfig{3, 2, 5, 4, 96});  // awkward: head_dim 5, pages of 4
  HostMirror m(cache);
  std::mt19937 rng(1);
  float next = 1;
  auto fill = [&](SeqId s, int64_t from, int64_t to) {
    for (int64_t p = from; p < to; ++p)
      for (int64_t l = 0; l < 3; ++l) m.store(l, s, p, next++);
  };
  const SeqId a = cache.create();
  cache.grow(a, 11);
  fill(a, 0, 11);
  // Branches share a's pages; each writes into the shared last page (copy on write) and beyond.
  std::vector<SeqId> br;
  for (int b = 0; b < 3; ++b) {
    const SeqId f = cache.fork(a);
    cache.truncate(f, 9 + b);
    cache.grow(f, 4);
    fill(f, 9 + b, 13 + b);
    br.push_back(f);
  }
  EXPECT_GE(m.page_copies, 3);
  // Tree verification's compaction on a branch, and on the original (its last page shared).
  const std::vector<int32_t> keep = {1, 3};
  cache.compact(br[1], 9, keep);
  cache.compact(a, 6, std::vector<int32_t>{0, 2, 4});
  EXPECT_GE(m.slot_copies, 3);
  // Release a branch, reuse its pages for a new sequence.
  cache.release(br[0]);
  const SeqId c = cache.create();
  cache.grow(c, 7);
  fill(c, 0, 7);
  for (SeqId s : {a, br[1], br[2], c}) m.expect_same(s);
  // Random rounds: fork, write, compact or truncate.
  for (int round = 0; round < 40; ++round) {
    const SeqId f = cache.fork(a);
    const int64_t len = cache.length(f);
    cache.grow(f, 3);
    fill(f, len, len + 3);
    if (rng() % 2)
      cache.compact(f, len, std::vector<int32_t>{static_cast<int32_t>(rng() % 3)});
    else
      cache.truncate(f, len + 1);
    m.expect_same(f);
    m.expect_same(a);
    cache.release(f);
  }
}

}  // namespace
}  // namespace ssd
