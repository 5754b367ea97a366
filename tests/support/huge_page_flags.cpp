// /proc/self/smaps lookups for huge_page_flags.h.
#include "tests/support/huge_page_flags.h"

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace ssd::test {

bool thp_available() {
  return std::filesystem::exists("/sys/kernel/mm/transparent_hugepage/enabled");
}

std::string vm_flags_of(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  const auto addr = reinterpret_cast<uintptr_t>(p);
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> lo >> dash >> hi && dash == '-') {  // "lo-hi perms ..." opens an entry
      inside = lo <= addr && addr < hi;
      continue;
    }
    if (inside && line.rfind("VmFlags:", 0) == 0) return line;
  }
  return "";
}

bool marked_for_huge_pages(const void* p) {
  return (vm_flags_of(p) + " ").find(" hg ") != std::string::npos;
}

}  // namespace ssd::test
