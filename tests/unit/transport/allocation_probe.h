// A test-only cap on single allocations in the transport test binary (allocation_probe.cpp
// replaces the global operator new): while an AllocationCap is alive, an allocation larger than
// its cap is refused with std::bad_alloc, without allocating, and its size is recorded. Decoding a
// hostile head under a cap shows whether a peer's number reached an allocation, without letting a
// test allocate gigabytes on a shared machine.
#pragma once

#include <cstddef>

namespace ssd::transport_test {

class AllocationCap {
 public:
  explicit AllocationCap(size_t max_bytes);
  ~AllocationCap();
  AllocationCap(const AllocationCap&) = delete;
  AllocationCap& operator=(const AllocationCap&) = delete;
  // The largest allocation refused while this cap was alive (0: none).
  size_t largest_refused() const;
};

}  // namespace ssd::transport_test
