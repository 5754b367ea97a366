// Small vocabularies and text generators shared by the tokenizer tests.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "runtime/tokenizer/byte_level.h"
#include "runtime/tokenizer/tokenizer_spec.h"
#include "runtime/tokenizer/unicode_text.h"

namespace ssd::test {

// A byte-level vocabulary: the 256 byte tokens (id = byte value), then the merged tokens listed
// in `merges` (in the byte-level alphabet, ranked in order), then control tokens <|im_start|>,
// <|im_end|>, <|endoftext|>, <|end|>, <|begin|> and the user-defined token "<tool>". BOS is
// <|begin|>, EOS <|im_end|>.
inline TokenizerSpec tiny_byte_spec(
    std::vector<std::pair<std::string, std::string>> merges = {
        {"h", "e"}, {"l", "l"}, {"he", "ll"}, {"hell", "o"}, {"Ġ", "w"}, {"o", "r"},
        {"Ġw", "or"}, {"l", "d"}, {"Ġwor", "ld"}, {"Ġ", "Ġ"}, {"ĠĠ", "ĠĠ"}}) {
  TokenizerSpec s;
  s.source = "tiny-byte-vocab";
  s.kind = TokenizerKind::ByteBpe;
  s.pre = PreTokenizerKind::Gpt2;
  for (int b = 0; b < 256; ++b) s.tokens.push_back(byte_level_char(static_cast<uint8_t>(b)));
  for (const auto& [a, b] : merges) {
    bool seen = false;
    for (const auto& t : s.tokens) seen = seen || t == a + b;
    if (!seen) s.tokens.push_back(a + b);
  }
  s.merges = std::move(merges);
  s.types.assign(s.tokens.size(), TokenType::Normal);
  for (const char* t : {"<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|end|>", "<|begin|>"}) {
    s.tokens.push_back(t);
    s.types.push_back(TokenType::Control);
  }
  s.tokens.push_back("<tool>");
  s.types.push_back(TokenType::UserDefined);
  auto id = [&](const std::string& t) {
    for (size_t i = 0; i < s.tokens.size(); ++i)
      if (s.tokens[i] == t) return static_cast<int32_t>(i);
    return -1;
  };
  s.bos_id = id("<|begin|>");
  s.eos_id = id("<|im_end|>");
  add_default_eog_ids(s);
  return s;
}

// Random text drawn from pieces that stress tokenizers: mixed scripts, emoji with joiners,
// combining marks, whitespace runs, \r\n, digits, contractions.
inline std::string random_text(std::mt19937& rng, int max_pieces = 24) {
  static const std::vector<std::string> pool = {
      "the", "The", " quick", "fox", "I'm", "DON'T", "they'll", "'s", "42", "2024", "3.14",
      " ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", " \n ", "\xC2\xA0", "\xE3\x80\x80",
      "caf\xC3\xA9", "e\xCC\x81", "\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E", "\xED\x95\x9C",
      "\xF0\x9F\x98\x80", "\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD",
      "\xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA7",
      "\xD0\x9F\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82", "\xD9\x85\xD8\xB1\xD8\xAD\xD8\xA8\xD8\xA7",
      "\xE0\xA4\xB9\xE0\xA4\xBF", "!", "?", "...", "{}", "()", "<", ">", "#", "\\", "\"", "-",
      "\xE2\x80\x94", "\xE2\x91\xA0", "\xC2\xBD"};
  std::uniform_int_distribution<int> n_pieces(1, max_pieces);
  std::uniform_int_distribution<size_t> pick(0, pool.size() - 1);
  // Any code point from planes 0-3 and 14-16. Planes 4-13 are unassigned, and real byte-level
  // vocabularies may lack their UTF-8 lead bytes (SmolLM2 has no token for F1 or F2).
  std::uniform_int_distribution<uint32_t> cp_dist(0x20, 0x3FFFF + (0x10FFFF - 0xE0000) + 1);
  std::string s;
  for (int i = n_pieces(rng); i > 0; --i) {
    if (rng() % 8 == 0) {  // any scalar value now and then
      uint32_t cp = cp_dist(rng);
      if (cp > 0x3FFFF) cp += 0xE0000 - 0x40000;
      if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0xFFFD;
      append_utf8(s, cp);
    } else {
      s += pool[pick(rng)];
    }
  }
  return s;
}

// True if s is valid UTF-8.
inline bool valid_utf8(const std::string& s) {
  for (size_t pos = 0; pos < s.size();) {
    const Utf8Char u = decode_utf8(s, pos);
    if (u.cp == kInvalidCodePoint) return false;
    pos += u.len;
  }
  return true;
}

}  // namespace ssd::test
