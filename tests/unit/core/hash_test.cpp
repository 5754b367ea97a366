// runtime/core/hash.h against FNV-1a's published 64-bit test vectors, and the byte-wise form
// against the string form (the vocabulary fingerprint mixes length bytes one by one).
#include <gtest/gtest.h>

#include "runtime/core/hash.h"

namespace ssd {
namespace {

TEST(Fnv1a, PublishedVectors) {
  EXPECT_EQ(fnv1a(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(fnv1a("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(fnv1a("foobar"), 0x85944171f73967e8ull);
}

TEST(Fnv1a, BytewiseAndChainedEqualWhole) {
  uint64_t h = kFnv1aOffset;
  for (char c : std::string_view("foo")) h = fnv1a_byte(h, static_cast<unsigned char>(c));
  EXPECT_EQ(fnv1a("bar", h), fnv1a("foobar"));
  static_assert(fnv1a("a") == 0xaf63dc4c8601ec8cull, "usable at compile time");
}

}  // namespace
}  // namespace ssd
