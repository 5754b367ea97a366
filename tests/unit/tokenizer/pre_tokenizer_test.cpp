// Pre-tokenizer splits. Expected pieces follow the regexes in tokenizer_spec.h; each case was
// cross-checked against tokenizers 0.23.3's Split(Regex(...), "isolated") (onig regex engine).
// The live comparison in tests/reference covers random strings.
#include "runtime/tokenizer/pre_tokenizer.h"

#include <gtest/gtest.h>

#include <random>

#include "tests/unit/tokenizer/tokenizer_test_util.h"

namespace ssd {
namespace {

using Pieces = std::vector<std::string>;

Pieces split(PreTokenizerKind kind, std::string_view text) {
  std::vector<std::string_view> views;
  pre_tokenize(kind, text, views);
  return Pieces(views.begin(), views.end());
}

TEST(PreTokenizer, Gpt2) {
  const auto k = PreTokenizerKind::Gpt2;
  EXPECT_EQ(split(k, "Hello world"), (Pieces{"Hello", " world"}));
  // Contractions are case-sensitive: "'T" is punctuation then a letter.
  EXPECT_EQ(split(k, "I'm DON'T"), (Pieces{"I", "'m", " DON", "'", "T"}));
  EXPECT_EQ(split(k, "'sup"), (Pieces{"'s", "up"}));
  // A whitespace run before a word leaves its last space to the word ...
  EXPECT_EQ(split(k, "a   b"), (Pieces{"a", "  ", " b"}));
  EXPECT_EQ(split(k, "x  \n y"), (Pieces{"x", "  \n", " y"}));
  // ... but only U+0020 joins the word; another space character stands alone.
  EXPECT_EQ(split(k, "a\t\tb"), (Pieces{"a", "\t", "\t", "b"}));
  EXPECT_EQ(split(k, "a\xC2\xA0\xC2\xA0" "b"), (Pieces{"a", "\xC2\xA0", "\xC2\xA0", "b"}));
  EXPECT_EQ(split(k, "end  "), (Pieces{"end", "  "}));  // a trailing run stays whole
  EXPECT_EQ(split(k, "123abc 45"), (Pieces{"123", "abc", " 45"}));
  EXPECT_EQ(split(k, "hi!!! ?"), (Pieces{"hi", "!!!", " ?"}));
  EXPECT_EQ(split(k, "caf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC"),
            (Pieces{"caf\xC3\xA9", " \xE6\x97\xA5\xE6\x9C\xAC"}));
}

TEST(PreTokenizer, Llama3) {
  const auto k = PreTokenizerKind::Llama3;
  EXPECT_EQ(split(k, "I'M DON'T they'LL"), (Pieces{"I", "'M", " DON", "'T", " they", "'LL"}));
  // (?i) folds U+017F LONG S to 's'.
  EXPECT_EQ(split(k, "a'\xC5\xBF" "b"), (Pieces{"a", "'\xC5\xBF", "b"}));
  EXPECT_EQ(split(k, "12345678"), (Pieces{"123", "456", "78"}));
  EXPECT_EQ(split(k, "(word"), (Pieces{"(word"}));   // any non-letter/number/newline prefixes
  EXPECT_EQ(split(k, "\tword"), (Pieces{"\tword"}));
  EXPECT_EQ(split(k, "a \r\n\r\n  b"), (Pieces{"a", " \r\n\r\n", " ", " b"}));
  EXPECT_EQ(split(k, "x...\n\ny"), (Pieces{"x", "...\n\n", "y"}));
  EXPECT_EQ(split(k, "  \n  x"), (Pieces{"  \n", " ", " x"}));
}

TEST(PreTokenizer, Qwen2SplitsEveryDigit) {
  EXPECT_EQ(split(PreTokenizerKind::Qwen2, "12345 ab"), (Pieces{"1", "2", "3", "4", "5", " ab"}));
  EXPECT_EQ(split(PreTokenizerKind::Qwen2, "a \r\n\r\n  b"), (Pieces{"a", " \r\n\r\n", " ", " b"}));
}

TEST(PreTokenizer, SmolLMIsolatesDigitsThenGpt2) {
  const auto k = PreTokenizerKind::SmolLM;
  EXPECT_EQ(split(k, "abc123 def"), (Pieces{"abc", "1", "2", "3", " def"}));
  // The space before a digit is a stretch of its own (the digit split comes first).
  EXPECT_EQ(split(k, " 1 2"), (Pieces{" ", "1", " ", "2"}));
  EXPECT_EQ(split(k, "x 42y"), (Pieces{"x", " ", "4", "2", "y"}));
  EXPECT_EQ(split(k, "\xD9\xA1\xD9\xA2 z"), (Pieces{"\xD9\xA1", "\xD9\xA2", " z"}));  // Arabic-Indic
}

TEST(PreTokenizer, NoneKeepsTextWhole) {
  EXPECT_EQ(split(PreTokenizerKind::None, "a b  c"), (Pieces{"a b  c"}));
  EXPECT_EQ(split(PreTokenizerKind::Gpt2, ""), Pieces{});
}

// Whatever the input, even invalid UTF-8, the pieces are non-empty and tile the text exactly.
TEST(PreTokenizer, PiecesTileArbitraryBytes) {
  std::mt19937 rng(7);
  for (auto kind : {PreTokenizerKind::Gpt2, PreTokenizerKind::Llama3, PreTokenizerKind::Qwen2,
                    PreTokenizerKind::SmolLM}) {
    for (int iter = 0; iter < 300; ++iter) {
      std::string text = test::random_text(rng);
      if (iter % 3 == 0)  // sprinkle stray bytes: continuations, bad leads, truncated sequences
        for (int j = 0; j < 3; ++j)
          text.insert(rng() % (text.size() + 1), 1, static_cast<char>(0x80 + rng() % 0x80));
      std::vector<std::string_view> pieces;
      pre_tokenize(kind, text, pieces);
      std::string joined;
      for (auto p : pieces) {
        ASSERT_FALSE(p.empty());
        joined += p;
      }
      ASSERT_EQ(joined, text) << pre_tokenizer_name(kind);
    }
  }
}

}  // namespace
}  // namespace ssd
