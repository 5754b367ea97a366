// StreamDecoder: chunks are always whole UTF-8 characters, and all chunks plus flush() equal
// decode() of the same ids.
#include "runtime/tokenizer/stream_decoder.h"

#include <gtest/gtest.h>

#include <random>

#include "tests/unit/tokenizer/tokenizer_test_util.h"

namespace ssd {
namespace {

TEST(StreamDecoder, HoldsBackPartialCharacters) {
  const Tokenizer t(test::tiny_byte_spec());
  // With no merges over its bytes, U+1F600 (F0 9F 98 80) arrives as four byte tokens.
  const auto ids = t.encode("a\xF0\x9F\x98\x80" "b", false, false);
  ASSERT_EQ(ids.size(), 6u);
  StreamDecoder d(t);
  EXPECT_EQ(d.push(ids[0]), "a");
  EXPECT_EQ(d.push(ids[1]), "");
  EXPECT_EQ(d.pending_bytes(), 1u);
  EXPECT_EQ(d.push(ids[2]), "");
  EXPECT_EQ(d.push(ids[3]), "");
  EXPECT_EQ(d.pending_bytes(), 3u);
  EXPECT_EQ(d.push(ids[4]), "\xF0\x9F\x98\x80");
  EXPECT_EQ(d.push(ids[5]), "b");
  EXPECT_EQ(d.flush(), "");
}

TEST(StreamDecoder, FlushReturnsAnIncompleteTail) {
  const Tokenizer t(test::tiny_byte_spec());
  const auto ids = t.encode("x\xE6\x97\xA5", false, false);  // x + U+65E5 as three byte tokens
  StreamDecoder d(t);
  EXPECT_EQ(d.push(ids[0]), "x");
  EXPECT_EQ(d.push(ids[1]), "");
  EXPECT_EQ(d.push(ids[2]), "");
  EXPECT_EQ(d.flush(), "\xE6\x97");
  EXPECT_EQ(d.pending_bytes(), 0u);
}

TEST(StreamDecoder, StrayBytesAreNotHeldForever) {
  const Tokenizer t(test::tiny_byte_spec());
  StreamDecoder d(t);
  // A lone continuation byte can never complete: it is passed through at once.
  EXPECT_EQ(d.push(0x80), "\x80");
  EXPECT_EQ(d.push(0xE6), "");  // a lead byte waits ...
  EXPECT_EQ(d.push('a'), "\xE6" "a");  // ... until it is clear it will not be completed
}

TEST(StreamDecoder, SkipsSpecialTokensByDefault) {
  const Tokenizer t(test::tiny_byte_spec());
  const auto ids = t.encode("hi<|im_end|>", false, true);
  StreamDecoder quiet(t), verbose(t, /*skip_special=*/false);
  std::string a, b;
  for (int32_t id : ids) {
    a += quiet.push(id);
    b += verbose.push(id);
  }
  EXPECT_EQ(a, "hi");
  EXPECT_EQ(b, "hi<|im_end|>");
}

TEST(StreamDecoder, ChunksAreValidUtf8AndSumToDecode) {
  const Tokenizer t(test::tiny_byte_spec());
  std::mt19937 rng(5);
  for (int i = 0; i < 300; ++i) {
    const std::string s = test::random_text(rng);
    const auto ids = t.encode(s, false, false);
    StreamDecoder d(t);
    std::string joined;
    for (int32_t id : ids) {
      const std::string chunk = d.push(id);
      ASSERT_TRUE(test::valid_utf8(chunk));
      joined += chunk;
    }
    EXPECT_EQ(d.flush(), "");
    ASSERT_EQ(joined, s);
  }
}

}  // namespace
}  // namespace ssd
