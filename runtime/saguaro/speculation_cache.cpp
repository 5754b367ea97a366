#include "runtime/saguaro/speculation_cache.h"

namespace ssd {

void SpeculationCache::replace(std::vector<CacheEntry> entries) {
  entries_.clear();
  for (CacheEntry& e : entries) {
    const Key key{e.seq, e.k, e.bonus};
    entries_.try_emplace(key, std::move(e));
  }
}

const CacheEntry* SpeculationCache::find(int32_t seq, uint64_t parent, int32_t k,
                                         int32_t bonus) const {
  auto it = entries_.find(Key{seq, k, bonus});
  if (it == entries_.end() || it->second.parent != parent) return nullptr;
  return &it->second;
}

std::optional<Speculation> SpeculationCache::lookup(int32_t seq, uint64_t parent, int32_t k,
                                                    int32_t bonus) {
  const CacheEntry* e = find(seq, parent, k, bonus);
  if (!e) {
    misses_++;
    return std::nullopt;
  }
  hits_++;
  return e->spec;
}

}  // namespace ssd
