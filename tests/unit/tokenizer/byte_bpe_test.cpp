// Byte-level BPE on small hand-made vocabularies: merge order, special tokens, BOS handling and
// the exact round trip. Expected ids are worked out by hand from the merge lists below.
#include <gtest/gtest.h>

#include <random>
#include <thread>

#include "runtime/core/error.h"
#include "runtime/tokenizer/tokenizer.h"
#include "tests/unit/tokenizer/tokenizer_test_util.h"

namespace ssd {
namespace {

std::vector<std::string> texts(const Tokenizer& t, const std::vector<int32_t>& ids) {
  std::vector<std::string> out;
  for (int32_t id : ids) out.push_back(t.token_text(id));
  return out;
}

using Strs = std::vector<std::string>;

TEST(ByteBpe, MergesByRankThenLeftmost) {
  // Ranks: a+b (0) beats b+c (1); c+d (2).
  const Tokenizer t(test::tiny_byte_spec({{"a", "b"}, {"b", "c"}, {"c", "d"}, {"a", "a"}}));
  EXPECT_EQ(texts(t, t.encode("abc", false, false)), (Strs{"ab", "c"}));
  EXPECT_EQ(texts(t, t.encode("bcd", false, false)), (Strs{"bc", "d"}));
  EXPECT_EQ(texts(t, t.encode("abcd", false, false)), (Strs{"ab", "cd"}));
  // Equal ranks: leftmost first, so "aaa" is aa+a, not a+aa.
  EXPECT_EQ(texts(t, t.encode("aaa", false, false)), (Strs{"aa", "a"}));
  EXPECT_EQ(texts(t, t.encode("aaaa", false, false)), (Strs{"aa", "aa"}));
}

TEST(ByteBpe, MergesBuildOnEarlierMerges) {
  const Tokenizer t(test::tiny_byte_spec());
  EXPECT_EQ(texts(t, t.encode("hello world", false, false)), (Strs{"hello", "Ġworld"}));
  // Four spaces before a word split as "   " + " world"; "   " merges Ġ+Ġ once (leftmost) and
  // there is no ĠĠ+Ġ merge. Five trailing spaces stay one piece: ĠĠ ĠĠ Ġ, then ĠĠ+ĠĠ.
  EXPECT_EQ(texts(t, t.encode("    world", false, false)), (Strs{"ĠĠ", "Ġ", "Ġworld"}));
  EXPECT_EQ(texts(t, t.encode("     ", false, false)), (Strs{"ĠĠĠĠ", "Ġ"}));
}

TEST(ByteBpe, LongWordsMergeCompletely) {
  // 4096 'a': a+a then aa+aa leaves exactly 1024 "aaaa" tokens. The heap keeps this O(n log n).
  const Tokenizer t(test::tiny_byte_spec({{"a", "a"}, {"aa", "aa"}}));
  const auto ids = t.encode(std::string(4096, 'a'), false, false);
  ASSERT_EQ(ids.size(), 1024u);
  for (int32_t id : ids) ASSERT_EQ(t.token_text(id), "aaaa");
  const auto odd = t.encode(std::string(4097, 'a'), false, false);
  EXPECT_EQ(odd.size(), 1025u);
  EXPECT_EQ(t.token_text(odd.back()), "a");
}

TEST(ByteBpe, IgnoreMergesTakesWholeWordTokens) {
  // "abc" is a token but no merge sequence reaches it from "ab"+"c" being absent.
  auto spec = test::tiny_byte_spec({{"a", "b"}, {"b", "c"}});
  spec.tokens.push_back("abc");
  spec.types.push_back(TokenType::Normal);
  const Tokenizer plain(spec);
  EXPECT_EQ(texts(plain, plain.encode("abc", false, false)), (Strs{"ab", "c"}));
  spec.ignore_merges = true;
  const Tokenizer direct(spec);
  EXPECT_EQ(texts(direct, direct.encode("abc abc", false, false)), (Strs{"abc", "Ġ", "ab", "c"}));
}

TEST(ByteBpe, SpecialTokensLongestMatchAndParseFlag) {
  const Tokenizer t(test::tiny_byte_spec());
  const int32_t start = *t.find_token("<|im_start|>"), end = *t.find_token("<|im_end|>");
  const int32_t eot = *t.find_token("<|endoftext|>"), end_short = *t.find_token("<|end|>");
  EXPECT_EQ(t.encode("<|im_start|>hello<|im_end|>", false, true),
            (std::vector<int32_t>{start, *t.find_token("hello"), end}));
  // <|end|> and <|endoftext|> share a prefix: the longer one wins where both could match.
  EXPECT_EQ(t.encode("<|endoftext|><|end|>", false, true), (std::vector<int32_t>{eot, end_short}));
  // Without parse_special the markers are ordinary text, one byte token per character here.
  const auto as_text = t.encode("<|im_start|>", false, false);
  EXPECT_EQ(as_text.size(), std::string("<|im_start|>").size());
  EXPECT_EQ(t.decode(as_text), "<|im_start|>");
  // User-defined tokens always match.
  const int32_t tool = *t.find_token("<tool>");
  EXPECT_EQ(t.encode("<tool>", false, false), (std::vector<int32_t>{tool}));
  // A partial marker is text.
  EXPECT_EQ(t.decode(t.encode("<|im_sta", false, true)), "<|im_sta");
}

TEST(ByteBpe, BosAddedOnceAndOnlyWhenTheVocabularyAsks) {
  auto spec = test::tiny_byte_spec();
  const int32_t bos = spec.bos_id;
  {
    const Tokenizer no_auto(spec);  // add_bos false in the spec: encode(add_bos=true) adds none
    EXPECT_EQ(no_auto.encode("hello", true, true), no_auto.encode("hello", false, true));
  }
  spec.add_bos = true;
  const Tokenizer t(spec);
  const auto plain = t.encode("hello", false, true);
  auto with = t.encode("hello", true, true);
  ASSERT_EQ(with.size(), plain.size() + 1);
  EXPECT_EQ(with.front(), bos);
  // The text already begins with BOS: not doubled.
  with = t.encode("<|begin|>hello", true, true);
  EXPECT_EQ(with.size(), plain.size() + 1);
  EXPECT_EQ(with[0], bos);
  EXPECT_NE(with[1], bos);
  EXPECT_EQ(t.encode("", true, true), (std::vector<int32_t>{bos}));
}

TEST(ByteBpe, DecodeSkipsSpecialsOnRequestAndChecksRange) {
  const Tokenizer t(test::tiny_byte_spec());
  const auto ids = t.encode("<|im_start|>hello<tool><|im_end|>", false, true);
  EXPECT_EQ(t.decode(ids), "<|im_start|>hello<tool><|im_end|>");
  EXPECT_EQ(t.decode(ids, /*skip_special=*/true), "hello<tool>");  // user-defined is text
  const std::vector<int32_t> bad{t.vocab_size()};
  EXPECT_THROW(t.decode(bad), Error);
  EXPECT_THROW(t.piece(-1), Error);
}

TEST(ByteBpe, EndOfGenerationIds) {
  const Tokenizer t(test::tiny_byte_spec());
  EXPECT_TRUE(t.is_eog(t.eos()));
  EXPECT_TRUE(t.is_eog(*t.find_token("<|endoftext|>")));
  EXPECT_TRUE(t.is_eog(*t.find_token("<|end|>")));
  EXPECT_FALSE(t.is_eog(*t.find_token("<|im_start|>")));
  EXPECT_FALSE(t.is_eog(*t.find_token("hello")));
  EXPECT_FALSE(t.is_eog(-1));
}

// decode(encode(s)) == s for random UTF-8 (and for arbitrary bytes): byte-level BPE loses nothing.
TEST(ByteBpe, RoundTripIsExact) {
  const Tokenizer t(test::tiny_byte_spec());
  std::mt19937 rng(11);
  for (int i = 0; i < 500; ++i) {
    std::string s = test::random_text(rng);
    if (i % 5 == 0) s += "<|im_end|>x<tool>";
    ASSERT_EQ(t.decode(t.encode(s, false, false)), s);
    ASSERT_EQ(t.decode(t.encode(s, false, true)), s);
  }
  std::string bytes;
  for (int i = 0; i < 2000; ++i) bytes.push_back(static_cast<char>(rng()));
  EXPECT_EQ(t.decode(t.encode(bytes, false, false)), bytes);
}

// The word cache is shared between threads; concurrent encodes must agree with serial ones.
TEST(ByteBpe, ConcurrentEncodesAgree) {
  const Tokenizer t(test::tiny_byte_spec());
  std::mt19937 rng(3);
  std::vector<std::string> inputs;
  for (int i = 0; i < 200; ++i) inputs.push_back(test::random_text(rng));
  std::vector<std::vector<int32_t>> a(inputs.size()), b(inputs.size());
  std::thread th([&] {
    for (size_t i = 0; i < inputs.size(); ++i) a[i] = t.encode(inputs[i], false, true);
  });
  for (size_t i = 0; i < inputs.size(); ++i) b[i] = t.encode(inputs[i], false, true);
  th.join();
  EXPECT_EQ(a, b);
}

}  // namespace
}  // namespace ssd
