// Replacement of the global operator new / delete for the transport tests (allocation_probe.h).
#include "tests/unit/transport/allocation_probe.h"

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <new>

namespace {

std::atomic<size_t> g_cap{SIZE_MAX};
std::atomic<size_t> g_refused{0};

}  // namespace

void* operator new(std::size_t n) {
  if (n > g_cap.load(std::memory_order_relaxed)) {
    size_t seen = g_refused.load();
    while (n > seen && !g_refused.compare_exchange_weak(seen, n)) {
    }
    throw std::bad_alloc();
  }
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}

void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace ssd::transport_test {

AllocationCap::AllocationCap(size_t max_bytes) {
  g_refused.store(0);
  g_cap.store(max_bytes);
}

AllocationCap::~AllocationCap() { g_cap.store(SIZE_MAX); }

size_t AllocationCap::largest_refused() const { return g_refused.load(); }

}  // namespace ssd::transport_test
