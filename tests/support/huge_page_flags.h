// Whether the memory at an address was marked for transparent huge pages (madvise MADV_HUGEPAGE):
// the "hg" flag of its /proc/self/smaps entry. The mark is what the code controls; whether the
// kernel then backs the range with huge pages depends on its THP mode and free memory.
//
//   if (!ssd::test::thp_available()) GTEST_SKIP() << "no transparent huge pages";
//   EXPECT_TRUE(ssd::test::marked_for_huge_pages(p)) << ssd::test::vm_flags_of(p);
#pragma once

#include <string>

namespace ssd::test {

// This kernel has transparent huge pages (/sys/kernel/mm/transparent_hugepage exists).
bool thp_available();
// The VmFlags line of the smaps entry whose range holds p ("" when none does).
std::string vm_flags_of(const void* p);
// That line has the "hg" flag.
bool marked_for_huge_pages(const void* p);

}  // namespace ssd::test
