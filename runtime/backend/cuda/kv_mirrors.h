// The device mirrors a backend keeps of the KvCaches it has written, one per live cache object.
//
// Why not a map keyed by the cache's address: a KvCache freed and a new one allocated at the
// same address (a session rebuilt, a drafter restarted) would find the old cache's mirror, with
// its old pages and its observer registration on a dead object. Here a mirror is keyed by
// KvCache::id() (never reused in a process), and a dying cache tells its observer, the mirror
// (KvPageObserver::cache_destroyed), which marks itself dead; prune() then frees it. A mirror
// that outlives its cache never touches it again, and one that dies first detaches itself.
//
// M (the mirror) is the cache's page observer; it needs: M(KvCache&, extra args...), and
// bool dead() const (true after cache_destroyed). Header-only and free of CUDA headers: the
// CUDA backend uses it with its DeviceKv, and tests/unit/device_math/kv_mirrors_test.cpp runs
// the same bookkeeping with a host mirror on machines without a GPU.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <utility>

#include "runtime/kv/kv_cache.h"

namespace ssd::cuda {

template <class M>
class KvMirrors {
 public:
  // The mirror of `cache`, made with M(cache, args...) when it has none; *created says which.
  template <class... A>
  M& get(KvCache& cache, bool* created, A&&... args) {
    auto it = by_id_.find(cache.id());
    *created = it == by_id_.end();
    if (*created)
      it = by_id_.emplace(cache.id(), std::make_unique<M>(cache, std::forward<A>(args)...)).first;
    return *it->second;
  }
  // The mirror of `cache`, or null.
  M* find(const KvCache& cache) const {
    auto it = by_id_.find(cache.id());
    return it == by_id_.end() ? nullptr : it->second.get();
  }
  // Whether a mirror's cache was destroyed (prune() would free something).
  bool has_dead() const {
    for (const auto& [id, m] : by_id_)
      if (m->dead()) return true;
    return false;
  }
  // Frees the mirrors of destroyed caches; returns how many. The caller makes sure no queued
  // device work still reads them.
  size_t prune() {
    size_t n = 0;
    for (auto it = by_id_.begin(); it != by_id_.end();) {
      if (it->second->dead()) {
        it = by_id_.erase(it);
        ++n;
      } else {
        ++it;
      }
    }
    return n;
  }
  template <class F>
  void for_each(F&& f) {
    for (auto& [id, m] : by_id_) f(*m);
  }
  size_t size() const { return by_id_.size(); }
  void clear() { by_id_.clear(); }

 private:
  std::map<uint64_t, std::unique_ptr<M>> by_id_;  // by KvCache::id()
};

}  // namespace ssd::cuda
