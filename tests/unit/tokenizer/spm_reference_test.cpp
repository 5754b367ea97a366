// SentencePiece-style BPE on a tiny Llama-2-like vocabulary (byte fallback, "▁" spaces, legacy
// Prepend/Replace normalizer), built here as a tokenizer.json exactly as
// tests/reference/make_tokenizer_expectations.py builds it (keep SPM_CHARS / SPM_PIECES in sync).
// The expected ids were produced by that script with tokenizers 0.23.3
// (Tokenizer.from_str(...).encode(s, add_special_tokens=True)); they are exact.
#include <gtest/gtest.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>

#include "runtime/io/gguf_file.h"
#include "runtime/tokenizer/gguf_tokenizer.h"
#include "runtime/tokenizer/hf_tokenizer.h"
#include "runtime/tokenizer/tokenizer.h"
#include "runtime/tokenizer/unicode_text.h"
#include "tests/support/gguf_writer.h"
#include "tests/support/temp_dir.h"

namespace ssd {
namespace {

const std::string kSp = "\xE2\x96\x81";  // '▁'

// '_' stands for '▁' in these lists (no entry contains a real underscore).
std::string sp(std::string s) {
  std::string out;
  for (char c : s) out += c == '_' ? kSp : std::string(1, c);
  return out;
}

const char* const kChars = "_etaoinshrdlucmfwypvbgkqjxzTIAHSW0123456789.,'!?-";
const std::vector<std::string> kPieces = {
    "_t", "he", "_a", "in", "er", "on", "re", "_the", "at", "en", "_s", "_w", "or", "es", "_o",
    "an", "is", "it", "ll", "ing", "_in", "_b", "ed", "_c", "ou", "_m", "ar", "_to", "nd", "_and",
    "_of", "_is", "_h", "_he", "llo", "_hello", "_wor", "ld", "_world", "_I", "_It", "'s", "__",
    "____", "_1", "12", "_T", "_The", "_H", "_He", "_Hello", "at_", "_cat", "_on", "_mat", "_o'",
    "ck", "_cl", "_clo", "_clock", "_tw", "_two", "_sp", "ac", "ace", "_space", "_spaces", "_n",
    "ew", "_new", "_l", "ine", "_line", "_ta", "_tab", "_her", "_here", "_e", "mo", "_emo", "ji",
    "_emoji"};

std::string tiny_spm_json() {
  using nlohmann::json;
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  for (int b = 0; b < 256; ++b) tokens.push_back(fmt::format("<0x{:02X}>", b));
  const std::string chars = sp(kChars);
  for (size_t pos = 0; pos < chars.size();) {
    const uint32_t len = decode_utf8(chars, pos).len;
    tokens.push_back(chars.substr(pos, len));
    pos += len;
  }
  json vocab = json::object(), merges = json::array();
  for (size_t i = 0; i < tokens.size(); ++i) vocab[tokens[i]] = i;
  for (const std::string& raw : kPieces) {
    const std::string piece = sp(raw);
    // Every split into two known tokens, ordered by the left part's id (the converter's rule).
    std::vector<std::pair<int, json>> splits;
    for (size_t k = decode_utf8(piece, 0).len; k < piece.size(); k += decode_utf8(piece, k).len) {
      const std::string l = piece.substr(0, k), r = piece.substr(k);
      if (vocab.contains(l) && vocab.contains(r))
        splits.emplace_back(vocab[l].get<int>(), json::array({l, r}));
    }
    std::sort(splits.begin(), splits.end(), [](auto& a, auto& b) { return a.first < b.first; });
    for (auto& s : splits) merges.push_back(s.second);
    vocab[piece] = tokens.size();
    tokens.push_back(piece);
  }
  auto special = [](int id, const char* t) {
    return json{{"id", id}, {"content", t}, {"special", true}, {"normalized", false}};
  };
  const json single = json::array({json{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                                   json{{"Sequence", {{"id", "A"}, {"type_id", 0}}}}});
  return json{
      {"version", "1.0"},
      {"added_tokens", {special(0, "<unk>"), special(1, "<s>"), special(2, "</s>")}},
      {"normalizer",
       {{"type", "Sequence"},
        {"normalizers",
         {{{"type", "Prepend"}, {"prepend", kSp}},
          {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", kSp}}}}}},
      {"pre_tokenizer", nullptr},
      {"post_processor", {{"type", "TemplateProcessing"}, {"single", single}}},
      {"decoder", {{"type", "Sequence"}, {"decoders", json::array()}}},
      {"model",
       {{"type", "BPE"}, {"unk_token", "<unk>"}, {"byte_fallback", true}, {"fuse_unk", true},
        {"vocab", vocab}, {"merges", merges}}}}
      .dump();
}

struct Case {
  std::string text;
  std::vector<int32_t> ids;
};

// add_special_tokens=True: BOS (1) from the post-processor.
const std::vector<Case> kCases = {
    {"Hello world", {1, 358, 346}},
    {"the cat is on the mat", {1, 315, 360, 339, 361, 315, 362}},
    {"It's 12 o'clock", {1, 348, 349, 352, 294, 363, 272, 270, 263, 364}},
    {"  two  spaces   here ", {1, 350, 369, 259, 370, 371, 321, 350, 384, 259}},
    {"new\nline", {1, 377, 13, 270, 379}},
    {"tab\there", {1, 382, 12, 309, 314}},
    {"日本語", {1, 259, 233, 154, 168, 233, 159, 175, 235, 173, 161}},
    {"emoji 🎉!", {1, 389, 259, 243, 162, 145, 140, 305}},
    // tokenizers gives {1, 1, 343, ...}: its post-processor adds BOS even when the text starts
    // with one. We deliberately do not double it (see Tokenizer::encode).
    {"<s>hello</s> world", {1, 343, 2, 259, 346}},
    {"ñandü", {1, 259, 198, 180, 323, 269, 198, 191}},
    {"", {1}},
    {" ", {1, 350}},
    {"hello world hello world, the end.", {1, 343, 346, 343, 346, 303, 315, 259, 317, 269, 302}},
    {"ZZZ qqq", {1, 259, 93, 93, 93, 259, 282, 282, 282}},
};

TokenizerSpec hf_spec() { return tokenizer_spec_from_hf_json(tiny_spm_json(), "", "tiny-spm", ""); }

TEST(SpmReference, SpecFromTokenizerJson) {
  const TokenizerSpec s = hf_spec();
  EXPECT_EQ(s.kind, TokenizerKind::SpmBpe);
  EXPECT_EQ(s.pre, PreTokenizerKind::None);
  EXPECT_TRUE(s.add_space_prefix);
  EXPECT_TRUE(s.add_bos);  // from the TemplateProcessing post-processor
  EXPECT_EQ(s.bos_id, 1);
  EXPECT_EQ(s.unk_id, 0);
  EXPECT_EQ(s.types[0], TokenType::Unknown);
  EXPECT_EQ(s.types[1], TokenType::Control);
  EXPECT_EQ(s.types[3 + 0x41], TokenType::Byte);
  EXPECT_EQ(s.types[259], TokenType::Normal);
  EXPECT_EQ(s.tokens.size(), 3u + 256u + 49u + kPieces.size());
}

TEST(SpmReference, IdsMatchHfTokenizers) {
  const Tokenizer t(hf_spec());
  for (const Case& c : kCases) EXPECT_EQ(t.encode(c.text, true, true), c.ids) << c.text;
}

// The GGUF form of the same vocabulary has scores instead of merges (score = -id, so earlier
// pieces merge first, as the merge list orders them): the score-driven path must agree.
TEST(SpmReference, ScoresGiveTheSameIdsAsMerges) {
  TokenizerSpec s = hf_spec();
  s.merges.clear();
  for (size_t i = 0; i < s.tokens.size(); ++i) s.scores.push_back(-static_cast<float>(i));
  const Tokenizer t(std::move(s));
  for (const Case& c : kCases) EXPECT_EQ(t.encode(c.text, true, true), c.ids) << c.text;
}

TEST(SpmReference, GgufLlamaVocabulary) {
  const TokenizerSpec h = hf_spec();
  test::GgufWriter w;
  std::vector<double> scores;
  std::vector<int64_t> types;
  for (size_t i = 0; i < h.tokens.size(); ++i) {
    scores.push_back(-static_cast<double>(i));
    types.push_back(static_cast<int64_t>(h.types[i]));
  }
  w.add_string("tokenizer.ggml.model", "llama")
      .add_string_array("tokenizer.ggml.tokens", h.tokens)
      .add_float_array("tokenizer.ggml.scores", scores)
      .add_int_array("tokenizer.ggml.token_type", types)
      .add_u32("tokenizer.ggml.bos_token_id", 1)
      .add_u32("tokenizer.ggml.eos_token_id", 2)
      .add_u32("tokenizer.ggml.unknown_token_id", 0);
  test::TempDir tmp;
  const GgufFile g = GgufFile::open(w.write(tmp.file("spm.gguf")));
  const TokenizerSpec s = tokenizer_spec_from_gguf(g);
  EXPECT_EQ(s.kind, TokenizerKind::SpmBpe);
  EXPECT_TRUE(s.add_bos);           // SentencePiece default when the key is absent
  EXPECT_TRUE(s.add_space_prefix);  // likewise
  EXPECT_EQ(s.eog_ids, (std::vector<int32_t>{2}));
  const Tokenizer t(s);
  for (const Case& c : kCases) EXPECT_EQ(t.encode(c.text, true, true), c.ids) << c.text;
}

TEST(SpmReference, DecodeUndoesSpacesAndByteFallback) {
  const Tokenizer t(hf_spec());
  for (const char* s : {"Hello world", "  two  spaces   here ", "日本語 and ñ", "new\nline"}) {
    const auto ids = t.encode(s, true, false);
    EXPECT_EQ(t.decode(ids, /*skip_special=*/true), s);
  }
  // Rendered specials: the space prefix belongs to "▁Hello", so it stays (as tokenizers shows).
  EXPECT_EQ(t.decode(t.encode("Hello", true, false)), "<s> Hello");
  EXPECT_EQ(t.piece(3 + 0x0A), "\n");
  EXPECT_EQ(t.piece(358), " Hello");
}

TEST(SpmReference, MissingByteTokensFallBackToUnknown) {
  TokenizerSpec s = hf_spec();
  for (size_t b = 0; b < 256; ++b) s.tokens[3 + b] = fmt::format("<byte{}>", b);  // no <0xXX> left
  const Tokenizer t(std::move(s));
  // 'Z' has no token and no byte token: one <unk> per character.
  EXPECT_EQ(t.encode("ZZ", false, false), (std::vector<int32_t>{259, 0, 0}));
}

}  // namespace
}  // namespace ssd
