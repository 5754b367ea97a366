// Host memory in 2 MiB-aligned slabs that the kernel is asked to back with transparent huge pages
// (madvise MADV_HUGEPAGE): for the packed weights (kernels/cpu/packed_matrix.h, the process's
// shared arena) and the KV cache's pages (runtime/kv/kv_cache.h, one arena per cache).
//
// Why: a decode step streams every weight once, about 97 MB for the default model, and at long
// contexts as much again of cached K/V; in 4 KiB pages that is some 24,000 TLB misses a step for
// the weights alone, each a page walk, in 2 MiB pages fewer than 50. Linux's default THP mode on
// many distributions is "madvise", which gives huge pages only to memory that asks for them, so
// aligned_alloc and make_unique got none. Measured on the Xeon host (docs/performance.md, "Weights
// and K/V in huge pages"): decode several percent faster, more at long contexts.
//
// How: allocations are carved, 64-byte aligned, from slabs of kSlabBytes (virtual; the kernel
// backs a huge page when it is first touched), or given a mapping of their own (rounded up to
// whole huge pages) when larger than half a slab. A slab is never reused piecemeal: its bump
// pointer only grows, and the slab is unmapped when the last of its blocks is released, or when
// the arena is destroyed. What lives here lives long (a model's weights, a cache's pages), so the
// slack is at most one slab's tail per arena. Where THP is off ("never") or the madvise is
// refused, the memory is ordinary pages and nothing else changes. Thread-safe (one mutex;
// allocations happen at load time and as a cache grows).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

namespace ssd {

// The kernel's transparent-huge-page mode: "always", "madvise" or "never" (the bracketed word of
// /sys/kernel/mm/transparent_hugepage/enabled), or "" without THP. Under "never" the arena's
// memory is ordinary pages.
std::string thp_mode();

class HugePageArena {
 public:
  static constexpr uint64_t kHugePage = uint64_t{2} << 20;
  static constexpr uint64_t kSlabBytes = uint64_t{32} << 20;
  static constexpr uint64_t kAlign = 64;

  // The process's arena for blocks that live as long as a model (the packed weights of every
  // model share it; it is never destroyed).
  static HugePageArena& shared();

  HugePageArena() = default;
  ~HugePageArena();  // unmaps everything, released or not
  HugePageArena(const HugePageArena&) = delete;
  HugePageArena& operator=(const HugePageArena&) = delete;

  // A kAlign-aligned block of `bytes` (> 0) of zero-filled memory; throws when the system has
  // no memory to map.
  uint8_t* allocate(uint64_t bytes);
  // Gives back a block from allocate(); its slab is unmapped when it holds no other block.
  void release(uint8_t* p);

  // Mappings held (slabs and large blocks), and bytes mapped (tests, diagnostics).
  size_t mappings() const;
  uint64_t mapped_bytes() const;

 private:
  struct Mapping {
    uint64_t bytes = 0;  // mapped size, a multiple of kHugePage
    uint64_t used = 0;   // bump offset (slabs)
    int64_t live = 0;    // blocks not yet released
    bool slab = false;   // false: one large block
  };
  uint8_t* map(uint64_t bytes);  // kHugePage-aligned, asks for huge pages
  void unmap(uint8_t* base, uint64_t bytes);

  mutable std::mutex mu_;
  std::map<uintptr_t, Mapping> maps_;  // base address -> its mapping
  uintptr_t current_ = 0;              // the slab new small blocks come from (0: none)
};

}  // namespace ssd
