// HugePageArena: aligned, disjoint, zeroed blocks; slabs and large blocks on huge-page
// boundaries and marked for huge pages; every mapping returned once its blocks are released, also
// under concurrent use. (Whether the kernel then backs them with huge pages depends on the
// system's THP mode and free memory, so no test asserts it; docs/performance.md measures it.)
#include "runtime/core/huge_page_arena.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <thread>
#include <utility>
#include <vector>

#include "runtime/core/error.h"
#include "tests/support/huge_page_flags.h"

namespace ssd {
namespace {

using Arena = HugePageArena;

bool aligned(const uint8_t* p, uint64_t to) { return reinterpret_cast<uintptr_t>(p) % to == 0; }

TEST(HugePageArena, BlocksAreAlignedZeroedAndDisjoint) {
  Arena a;
  const std::vector<uint64_t> sizes = {1, 63, 64, 65, 4096, 200'000, 550'000, 3};
  std::vector<std::pair<uint8_t*, uint64_t>> blocks;
  for (uint64_t n : sizes) {
    uint8_t* p = a.allocate(n);
    ASSERT_TRUE(aligned(p, Arena::kAlign)) << n;
    EXPECT_TRUE(std::all_of(p, p + n, [](uint8_t b) { return b == 0; })) << n;
    std::memset(p, 0xab, n);  // writable, all of it
    blocks.push_back({p, n});
  }
  std::sort(blocks.begin(), blocks.end());
  for (size_t i = 1; i < blocks.size(); ++i)
    EXPECT_GE(blocks[i].first, blocks[i - 1].first + blocks[i - 1].second) << "overlap";
  EXPECT_EQ(a.mappings(), 1u) << "small blocks share one slab";
  for (auto [p, n] : blocks) a.release(p);
  EXPECT_EQ(a.mappings(), 0u);
  EXPECT_EQ(a.mapped_bytes(), 0u);
}

TEST(HugePageArena, ASlabStartsOnAHugePageAndTheNextOpensWhenItIsFull) {
  Arena a;
  const uint64_t block = Arena::kSlabBytes / 4;  // four fill a slab
  std::vector<uint8_t*> blocks;
  for (int i = 0; i < 5; ++i) blocks.push_back(a.allocate(block));
  EXPECT_TRUE(aligned(blocks[0], Arena::kHugePage));
  EXPECT_TRUE(aligned(blocks[4], Arena::kHugePage)) << "the fifth opened a new slab";
  EXPECT_EQ(a.mappings(), 2u);
  EXPECT_EQ(a.mapped_bytes(), 2 * Arena::kSlabBytes);
  for (int i = 0; i < 4; ++i) a.release(blocks[static_cast<size_t>(i)]);
  EXPECT_EQ(a.mappings(), 1u) << "the full slab went when its last block did";
  a.release(blocks[4]);
  EXPECT_EQ(a.mappings(), 0u);
}

TEST(HugePageArena, ALargeBlockHasItsOwnMappingInWholeHugePages) {
  Arena a;
  uint8_t* small = a.allocate(1000);
  const uint64_t n = Arena::kSlabBytes / 2 + 1;  // the LM head of a large vocabulary, say
  uint8_t* big = a.allocate(n);
  EXPECT_TRUE(aligned(big, Arena::kHugePage));
  EXPECT_EQ(a.mappings(), 2u);
  EXPECT_EQ(a.mapped_bytes(), Arena::kSlabBytes + (n + Arena::kHugePage - 1) /
                                                      Arena::kHugePage * Arena::kHugePage);
  big[n - 1] = 1;
  a.release(big);
  EXPECT_EQ(a.mappings(), 1u);
  a.release(small);
  EXPECT_EQ(a.mappings(), 0u);
}

TEST(HugePageArena, RefusesZeroBytesAndMemoryItDidNotGive) {
  Arena a;
  EXPECT_THROW(a.allocate(0), Error);
  uint8_t* p = a.allocate(128);
  uint8_t outside = 0;
  EXPECT_THROW(a.release(&outside), Error);
  a.release(p);
  EXPECT_THROW(a.release(p), Error) << "its slab is gone";
  a.release(nullptr);  // a no-op, as free(nullptr)
}

TEST(HugePageArena, ConcurrentAllocationsAreDisjointAndAllReturned) {
  Arena a;
  constexpr int kThreads = 4, kBlocks = 300;
  std::vector<std::vector<uint8_t*>> got(kThreads);
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t)
    ts.emplace_back([&, t] {
      for (int i = 0; i < kBlocks; ++i) {
        uint8_t* p = a.allocate(64 * static_cast<uint64_t>(1 + (i * 7 + t) % 50));
        p[0] = static_cast<uint8_t>(t + 1);  // a block written by two threads would show here
        got[static_cast<size_t>(t)].push_back(p);
      }
    });
  for (auto& th : ts) th.join();
  std::vector<uint8_t*> all;
  for (int t = 0; t < kThreads; ++t)
    for (uint8_t* p : got[static_cast<size_t>(t)]) {
      EXPECT_EQ(p[0], t + 1);
      all.push_back(p);
    }
  std::sort(all.begin(), all.end());
  EXPECT_EQ(std::adjacent_find(all.begin(), all.end()), all.end()) << "a block given twice";
  ts.clear();
  for (int t = 0; t < kThreads; ++t)
    ts.emplace_back([&, t] {
      for (uint8_t* p : got[static_cast<size_t>(t)]) a.release(p);
    });
  for (auto& th : ts) th.join();
  EXPECT_EQ(a.mappings(), 0u);
}

TEST(HugePageArena, TheThpModeIsTheBracketedWordOrEmpty) {
  const std::string mode = thp_mode();
  if (!test::thp_available()) {
    EXPECT_EQ(mode, "");
    return;
  }
  EXPECT_TRUE(mode == "always" || mode == "madvise" || mode == "never") << mode;
}

TEST(HugePageArena, SlabsAndLargeBlocksAskForHugePages) {
  if (!test::thp_available()) GTEST_SKIP() << "this kernel has no transparent huge pages";
  Arena a;
  uint8_t* small = a.allocate(4096);
  uint8_t* big = a.allocate(Arena::kSlabBytes);
  // "hg": the range was marked MADV_HUGEPAGE (whether the kernel then backs it with huge pages
  // depends on its THP mode and free memory, so that is not asserted).
  for (const uint8_t* p : {small, big})
    EXPECT_TRUE(test::marked_for_huge_pages(p)) << "VmFlags: " << test::vm_flags_of(p);
  a.release(small);
  a.release(big);
}

}  // namespace
}  // namespace ssd
