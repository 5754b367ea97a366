// Dispatch of the bandwidth probe and its baseline (SSE2-vectorised by the compiler) version.
#include "kernels/cpu/stream_read.h"

#include "kernels/cpu/rowops.h"

namespace ssd::kernels {

uint64_t stream_read(const uint64_t* p, int64_t n) {
  switch (active_isa()) {
    case Isa::Amx:
    case Isa::Avx512:
      return detail::stream_read_avx512(p, n);
    case Isa::Avx2:
      return detail::stream_read_avx2(p, n);
    case Isa::Scalar:
      break;
  }
  uint64_t a[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) a[j] += p[i + j];
  for (; i < n; ++i) a[0] += p[i];
  uint64_t s = 0;
  for (uint64_t v : a) s += v;
  return s;
}

}  // namespace ssd::kernels
