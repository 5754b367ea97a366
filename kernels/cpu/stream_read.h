// The memory-bandwidth probe of `ssd bench-kernels`: a streaming read of a buffer with the widest
// loads this CPU has (four independent accumulators, so the loop is bound by memory, not by
// latency), dispatched like the other kernels. Returns a checksum so the reads cannot be elided.
#pragma once

#include <cstdint>

namespace ssd::kernels {

// Sum of n 64-bit words starting at p (any alignment; aligned is the fast case).
uint64_t stream_read(const uint64_t* p, int64_t n);

namespace detail {
uint64_t stream_read_avx2(const uint64_t* p, int64_t n);
uint64_t stream_read_avx512(const uint64_t* p, int64_t n);
}  // namespace detail

}  // namespace ssd::kernels
