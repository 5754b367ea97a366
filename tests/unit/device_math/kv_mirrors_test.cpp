// The bookkeeping that ties a device KV mirror to one KvCache object (runtime/backend/cuda/kv_mirrors.h,
// KvCache::id, KvPageObserver::cache_destroyed), run with a host mirror: it needs no GPU.
// The bug it guards against: mirrors keyed by the cache's address, never dropped, so a cache
// created where a destroyed one lived (a stack cache in a loop, a session rebuilt) got the dead
// cache's mirror, with its geometry, its pages and its observer registration.
#include <gtest/gtest.h>

#include <new>
#include <set>

#include "runtime/backend/cuda/kv_mirrors.h"
#include "runtime/kv/kv_cache.h"

namespace ssd {
namespace {

// A mirror that only records what it was told; counts live instances.
class CountingMirror final : public KvPageObserver {
 public:
  static inline int alive = 0;
  CountingMirror(KvCache& c, int64_t tag) : cache_(&c), tag(tag), head_dim(c.config().head_dim) {
    ++alive;
    c.set_page_observer(this);
  }
  ~CountingMirror() override {
    --alive;
    if (cache_ && cache_->page_observer() == this) cache_->set_page_observer(nullptr);
  }
  void page_copied(int32_t, int32_t) override { ++page_copies; }
  void slot_copied(int32_t, int64_t, int32_t, int64_t) override {}
  void cache_destroyed(const KvCache& c) noexcept override {
    EXPECT_EQ(&c, cache_);
    ++destroyed_calls;
    cache_ = nullptr;
  }
  bool dead() const { return cache_ == nullptr; }

  KvCache* cache_;
  int64_t tag;
  int64_t head_dim;
  int page_copies = 0;
  int destroyed_calls = 0;
};

KvCacheConfig config(int64_t head_dim) { return KvCacheConfig{2, 2, head_dim, 16, 64}; }

TEST(KvMirrors, CacheIdsAreNeverReusedEvenAtTheSameAddress) {
  alignas(KvCache) unsigned char storage[sizeof(KvCache)];
  std::set<uint64_t> ids;
  for (int i = 0; i < 5; ++i) {
    KvCache* c = new (storage) KvCache(config(8));
    EXPECT_EQ(static_cast<void*>(c), static_cast<void*>(storage));
    EXPECT_GT(c->id(), 0u);
    EXPECT_TRUE(ids.insert(c->id()).second) << "id " << c->id() << " given twice";
    c->~KvCache();
  }
  KvCache a(config(8)), b(config(8));
  EXPECT_NE(a.id(), b.id());
}

TEST(KvMirrors, ADyingCacheTellsItsObserverOnce) {
  CountingMirror* m = nullptr;
  auto cache = std::make_unique<KvCache>(config(8));
  CountingMirror mirror(*cache, 1);
  m = &mirror;
  EXPECT_FALSE(m->dead());
  const SeqId s = cache->create();
  cache->grow(s, 3);
  const SeqId f = cache->fork(s);
  cache->key_mut(0, f, 1);  // copy on write: the observer hears of it
  EXPECT_EQ(m->page_copies, 1);
  cache.reset();
  EXPECT_TRUE(m->dead());
  EXPECT_EQ(m->destroyed_calls, 1);
  // The mirror's destructor (end of scope) must not touch the dead cache.
}

TEST(KvMirrors, AMirrorThatDiesFirstDetaches) {
  KvCache cache(config(8));
  {
    CountingMirror m(cache, 1);
    EXPECT_EQ(cache.page_observer(), &m);
  }
  EXPECT_EQ(cache.page_observer(), nullptr);  // so ~KvCache calls nobody
}

TEST(KvMirrors, ANewCacheAtAFreedAddressGetsAFreshMirror) {
  CountingMirror::alive = 0;
  cuda::KvMirrors<CountingMirror> mirrors;
  alignas(KvCache) unsigned char storage[sizeof(KvCache)];
  KvCache* a = new (storage) KvCache(config(8));
  bool created = false;
  CountingMirror& ma = mirrors.get(*a, &created, 1);
  EXPECT_TRUE(created);
  EXPECT_EQ(&mirrors.get(*a, &created, 99), &ma);  // found by id: not made again
  EXPECT_FALSE(created);
  EXPECT_EQ(ma.tag, 1);
  EXPECT_EQ(mirrors.find(*a), &ma);
  EXPECT_FALSE(mirrors.has_dead());

  a->~KvCache();  // the mirror hears of it and is dead; prune() frees it
  EXPECT_TRUE(mirrors.has_dead());
  KvCache* b = new (storage) KvCache(config(16));  // same address, other geometry
  ASSERT_EQ(static_cast<void*>(a), static_cast<void*>(b));
  EXPECT_EQ(mirrors.find(*b), nullptr) << "the dead cache's mirror was found for the new one";
  EXPECT_EQ(mirrors.prune(), 1u);
  EXPECT_EQ(CountingMirror::alive, 0);
  EXPECT_EQ(mirrors.size(), 0u);
  CountingMirror& mb = mirrors.get(*b, &created, 2);
  EXPECT_TRUE(created);
  EXPECT_EQ(mb.tag, 2);
  EXPECT_EQ(mb.head_dim, 16);
  EXPECT_EQ(b->page_observer(), &mb);  // the new cache reports its copies to the new mirror
  const SeqId s = b->create();
  b->grow(s, 2);
  b->key_mut(1, b->fork(s), 0);
  EXPECT_EQ(mb.page_copies, 1);

  // A live cache's mirror is never pruned; clear() detaches it from the live cache.
  EXPECT_EQ(mirrors.prune(), 0u);
  mirrors.clear();
  EXPECT_EQ(b->page_observer(), nullptr);
  b->~KvCache();
  EXPECT_EQ(CountingMirror::alive, 0);
}

}  // namespace
}  // namespace ssd
