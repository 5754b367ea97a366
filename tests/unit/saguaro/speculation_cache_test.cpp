// The speculation cache (runtime/saguaro/speculation_cache.h): keyed by (sequence, k, bonus),
// guarded by the parent speculation's id, replaced whole each round, counting hits and misses.
#include "runtime/saguaro/speculation_cache.h"

#include <gtest/gtest.h>

namespace ssd {
namespace {

CacheEntry entry(int32_t seq, uint64_t parent, int32_t k, int32_t bonus,
                 std::vector<int32_t> tokens) {
  CacheEntry e;
  e.seq = seq;
  e.parent = parent;
  e.k = k;
  e.bonus = bonus;
  e.spec.seq = seq;
  e.spec.source = SpecSource::kCache;
  for (int32_t t : tokens) {
    e.spec.tokens.push_back(t);
    e.spec.q.push_back(one_hot(t));
  }
  return e;
}

TEST(SpeculationCache, KeyedBySequenceKAndBonus) {
  SpeculationCache c;
  c.replace({entry(0, 3, 0, 11, {1, 2}), entry(0, 3, 1, 11, {3, 4}), entry(1, 7, 0, 11, {5, 6}),
             entry(0, 3, 0, 12, {7, 8})});
  EXPECT_EQ(c.size(), 4u);
  ASSERT_NE(c.find(0, 3, 0, 11), nullptr);
  EXPECT_EQ(c.find(0, 3, 0, 11)->spec.tokens, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(c.find(0, 3, 1, 11)->spec.tokens, (std::vector<int32_t>{3, 4}));
  EXPECT_EQ(c.find(1, 7, 0, 11)->spec.tokens, (std::vector<int32_t>{5, 6}));
  EXPECT_EQ(c.find(0, 3, 0, 12)->spec.tokens, (std::vector<int32_t>{7, 8}));
  EXPECT_EQ(c.find(1, 7, 1, 11), nullptr);  // other k
  EXPECT_EQ(c.find(2, 3, 0, 11), nullptr);  // other sequence
  EXPECT_EQ(c.find(0, 4, 0, 11), nullptr);  // an entry for another speculation: stale
  EXPECT_EQ(c.hits() + c.misses(), 0);      // find() does not count
}

TEST(SpeculationCache, LookupCountsAndCopies) {
  SpeculationCache c;
  c.replace({entry(0, 1, 2, 9, {4})});
  auto hit = c.lookup(0, 1, 2, 9);
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ(hit->tokens, (std::vector<int32_t>{4}));
  EXPECT_TRUE(hit->hit());
  EXPECT_FALSE(c.lookup(0, 1, 2, 8).has_value());
  EXPECT_FALSE(c.lookup(0, 0, 2, 9).has_value());
  EXPECT_EQ(c.hits(), 1);
  EXPECT_EQ(c.misses(), 2);
  EXPECT_EQ(c.size(), 1u);  // a lookup leaves the entry in place
}

TEST(SpeculationCache, ReplaceDropsTheOldRoundAndKeepsTheFirstDuplicate) {
  SpeculationCache c;
  c.replace({entry(0, 1, 0, 5, {1})});
  c.replace({entry(0, 2, 0, 6, {2}), entry(0, 2, 0, 6, {3})});
  EXPECT_EQ(c.size(), 1u);
  EXPECT_EQ(c.find(0, 1, 0, 5), nullptr);
  ASSERT_NE(c.find(0, 2, 0, 6), nullptr);
  EXPECT_EQ(c.find(0, 2, 0, 6)->spec.tokens, (std::vector<int32_t>{2}));
  c.clear();
  EXPECT_EQ(c.size(), 0u);
}

}  // namespace
}  // namespace ssd
