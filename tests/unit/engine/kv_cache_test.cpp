// Paged KV cache: growth, truncation, copy-on-write forks and tree compaction keep every
// position's K/V exactly (values are tagged with their (layer, position) so any mix-up shows).
#include <gtest/gtest.h>

#include "runtime/core/error.h"
#include "runtime/kv/kv_cache.h"
#include "tests/support/huge_page_flags.h"

namespace ssd {
namespace {

KvCacheConfig small_cfg(int64_t max_tokens = 256) {
  KvCacheConfig c;
  c.n_layers = 2;
  c.n_kv_heads = 2;
  c.head_dim = 3;
  c.page_tokens = 4;
  c.max_tokens = max_tokens;
  return c;
}

// Writes a recognisable tag into every float of (layer, pos) of seq.
void tag(KvCache& kv, SeqId s, int64_t pos, float t) {
  for (int64_t l = 0; l < kv.config().n_layers; ++l) {
    float* k = kv.key_mut(l, s, pos);
    float* v = kv.value_mut(l, s, pos);
    for (int i = 0; i < 6; ++i) {
      k[i] = t + l * 1000 + i * 0.01f;
      v[i] = -(t + l * 1000 + i * 0.01f);
    }
  }
}

// The tag stored at (layer, pos), after checking that all 12 floats there are that tag's.
float tag_of(const KvCache& kv, SeqId s, int64_t pos, int64_t layer = 1) {
  const float t = kv.key(layer, s, pos)[0] - layer * 1000;
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(kv.key(layer, s, pos)[i], t + layer * 1000 + i * 0.01f);
    EXPECT_EQ(kv.value(layer, s, pos)[i], -(t + layer * 1000 + i * 0.01f));
  }
  return t;
}

TEST(KvCache, PagesAreZeroedAndMarkedForHugePages) {
  KvCache kv(small_cfg());
  const SeqId s = kv.create();
  kv.grow(s, 3);
  const KvCacheConfig& c = kv.config();
  for (int64_t layer = 0; layer < c.n_layers; ++layer)
    for (int64_t pos = 0; pos < 3; ++pos)
      for (int64_t i = 0; i < c.n_kv_heads * c.head_dim; ++i) {
        ASSERT_EQ(kv.key(layer, s, pos)[i], 0.0f);
        ASSERT_EQ(kv.value(layer, s, pos)[i], 0.0f);
      }
  if (!test::thp_available()) GTEST_SKIP() << "this kernel has no transparent huge pages";
  EXPECT_TRUE(test::marked_for_huge_pages(kv.key(0, s, 0))) << test::vm_flags_of(kv.key(0, s, 0));
}

TEST(KvCache, GrowTruncateKeepsValues) {
  KvCache kv(small_cfg());
  SeqId s = kv.create();
  EXPECT_EQ(kv.grow(s, 10), 0);
  for (int p = 0; p < 10; ++p) tag(kv, s, p, p);
  EXPECT_EQ(kv.pages_in_use(), 3);
  kv.truncate(s, 5);
  EXPECT_EQ(kv.length(s), 5);
  EXPECT_EQ(kv.pages_in_use(), 2);
  EXPECT_EQ(kv.grow(s, 2), 5);
  for (int p = 0; p < 5; ++p) EXPECT_EQ(tag_of(kv, s, p), p);
  EXPECT_THROW(kv.truncate(s, 8), Error);
}

TEST(KvCache, ForkSharesPrefixAndCopiesOnWrite) {
  KvCache kv(small_cfg());
  SeqId a = kv.create();
  kv.grow(a, 6);
  for (int p = 0; p < 6; ++p) tag(kv, a, p, p);
  const int64_t pages_before = kv.pages_in_use();
  SeqId b = kv.fork(a);
  EXPECT_EQ(kv.pages_in_use(), pages_before);  // nothing copied
  // Branch b diverges at position 6 (inside the shared second page) and rewrites position 5.
  kv.grow(b, 1);
  tag(kv, b, 6, 106);
  tag(kv, b, 5, 105);
  EXPECT_EQ(kv.pages_in_use(), pages_before + 1);  // only the shared tail page was copied
  for (int p = 0; p < 5; ++p) {
    EXPECT_EQ(tag_of(kv, a, p), p);
    EXPECT_EQ(tag_of(kv, b, p), p);
  }
  EXPECT_EQ(tag_of(kv, a, 5), 5);
  EXPECT_EQ(tag_of(kv, b, 5), 105);
  EXPECT_EQ(tag_of(kv, b, 6), 106);
  EXPECT_EQ(kv.length(a), 6);
  kv.release(b);
  EXPECT_EQ(kv.pages_in_use(), pages_before);
  EXPECT_FALSE(kv.alive(b));
  EXPECT_THROW(kv.length(b), Error);
}

TEST(KvCache, CompactKeepsAcceptedPath) {
  KvCache kv(small_cfg());
  SeqId s = kv.create();
  kv.grow(s, 12);
  for (int p = 0; p < 12; ++p) tag(kv, s, p, p);
  SeqId shared = kv.fork(s);  // compaction must not disturb a sequence sharing the pages
  const int32_t keep[] = {1, 4, 7};
  kv.compact(s, 3, keep);
  ASSERT_EQ(kv.length(s), 6);
  const float expect[] = {0, 1, 2, 4, 7, 10};
  for (int p = 0; p < 6; ++p) EXPECT_EQ(tag_of(kv, s, p, 0), expect[p]);
  for (int p = 0; p < 12; ++p) EXPECT_EQ(tag_of(kv, shared, p, 0), p);
  const int32_t bad[] = {2, 1};
  EXPECT_THROW(kv.compact(s, 0, bad), Error);
}

TEST(KvCache, FullCacheIsAClearErrorAndReusesFreedPages) {
  KvCache kv(small_cfg(8));
  SeqId s = kv.create();
  kv.grow(s, 8);
  try {
    kv.grow(s, 1);
    FAIL() << "expected the cache to be full";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("KV cache full"), std::string::npos) << e.what();
  }
  kv.truncate(s, 0);
  SeqId t = kv.create();
  EXPECT_EQ(kv.grow(t, 8), 0);
}

}  // namespace
}  // namespace ssd
