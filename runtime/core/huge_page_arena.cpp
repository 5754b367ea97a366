// Slabs of huge-page-backed host memory; design in huge_page_arena.h.
#include "runtime/core/huge_page_arena.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "runtime/core/error.h"

namespace ssd {
namespace {

uint64_t round_up(uint64_t x, uint64_t to) { return (x + to - 1) / to * to; }

}  // namespace

std::string thp_mode() {
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string line;
  if (!std::getline(f, line)) return "";
  const size_t open = line.find('['), close = line.find(']');
  if (open == std::string::npos || close == std::string::npos || close < open) return "";
  return line.substr(open + 1, close - open - 1);
}

HugePageArena& HugePageArena::shared() {
  static HugePageArena* arena = new HugePageArena();  // never destroyed: weights may outlive
  return *arena;                                       // static destructors
}

HugePageArena::~HugePageArena() {
  for (const auto& [base, m] : maps_) unmap(reinterpret_cast<uint8_t*>(base), m.bytes);
}

uint8_t* HugePageArena::map(uint64_t bytes) {
  // Over-map by one huge page and trim, so that the block starts on a huge-page boundary (the
  // kernel can only back aligned 2 MiB ranges with a huge page).
  const uint64_t span = bytes + kHugePage;
  void* raw = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  SSD_CHECK(raw != MAP_FAILED, "cannot map {} bytes of host memory: {}", bytes,
            std::strerror(errno));
  const auto start = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t base = round_up(start, kHugePage);
  if (base > start) munmap(raw, base - start);
  const uintptr_t end = start + span;
  if (end > base + bytes) munmap(reinterpret_cast<void*>(base + bytes), end - (base + bytes));
  // A refusal (THP compiled out, an old kernel) leaves ordinary pages: nothing to report.
  madvise(reinterpret_cast<void*>(base), bytes, MADV_HUGEPAGE);
  return reinterpret_cast<uint8_t*>(base);
}

void HugePageArena::unmap(uint8_t* base, uint64_t bytes) { munmap(base, bytes); }

uint8_t* HugePageArena::allocate(uint64_t bytes) {
  SSD_CHECK(bytes > 0, "HugePageArena: an allocation of 0 bytes");
  bytes = round_up(bytes, kAlign);
  std::lock_guard<std::mutex> lock(mu_);
  if (bytes > kSlabBytes / 2) {  // a mapping of its own
    const uint64_t size = round_up(bytes, kHugePage);
    uint8_t* p = map(size);
    maps_[reinterpret_cast<uintptr_t>(p)] = {size, bytes, 1, false};
    return p;
  }
  auto it = current_ ? maps_.find(current_) : maps_.end();
  if (it == maps_.end() || it->second.used + bytes > it->second.bytes) {
    uint8_t* p = map(kSlabBytes);
    current_ = reinterpret_cast<uintptr_t>(p);
    it = maps_.emplace(current_, Mapping{kSlabBytes, 0, 0, true}).first;
  }
  Mapping& m = it->second;
  uint8_t* p = reinterpret_cast<uint8_t*>(it->first + m.used);
  m.used += bytes;
  ++m.live;
  return p;
}

void HugePageArena::release(uint8_t* p) {
  if (!p) return;
  std::lock_guard<std::mutex> lock(mu_);
  const auto addr = reinterpret_cast<uintptr_t>(p);
  auto it = maps_.upper_bound(addr);
  SSD_CHECK(it != maps_.begin(), "HugePageArena: releasing memory it did not give");
  --it;
  Mapping& m = it->second;
  SSD_CHECK(addr < it->first + m.bytes && m.live > 0,
            "HugePageArena: releasing memory it did not give");
  if (--m.live > 0) return;
  unmap(reinterpret_cast<uint8_t*>(it->first), m.bytes);
  if (it->first == current_) current_ = 0;
  maps_.erase(it);
}

size_t HugePageArena::mappings() const {
  std::lock_guard<std::mutex> lock(mu_);
  return maps_.size();
}

uint64_t HugePageArena::mapped_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t n = 0;
  for (const auto& [base, m] : maps_) n += m.bytes;
  return n;
}

}  // namespace ssd
