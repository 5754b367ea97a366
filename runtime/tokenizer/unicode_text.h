// UTF-8 decoding and the four character classes the pre-tokenizer regexes distinguish. Input
// text is arbitrary bytes: a byte that does not start a valid UTF-8 sequence (overlong forms,
// surrogates and values above U+10FFFF included) is one "character" of class Other, so splitting
// and byte-level BPE still cover every input byte and decode(encode(bytes)) reproduces them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ssd {

// \p{L}, \p{N}, \s (Unicode White_Space) and everything else.
enum class CharClass : uint8_t { Letter, Number, Space, Other };

struct Utf8Char {
  uint32_t cp;   // code point; kInvalidCodePoint for an invalid byte
  uint32_t len;  // bytes consumed (1..4)
};

inline constexpr uint32_t kInvalidCodePoint = 0xFFFFFFFFu;

// Decodes the character starting at s[pos] (pos < s.size()).
Utf8Char decode_utf8(std::string_view s, size_t pos);

// Appends the UTF-8 encoding of a valid code point.
void append_utf8(std::string& out, uint32_t cp);

// Class of a code point (via ICU general category and White_Space for non-ASCII).
CharClass char_class(uint32_t cp);

// Length of a UTF-8 sequence given its lead byte: 1..4, or 0 for a continuation/invalid byte.
inline uint32_t utf8_sequence_length(uint8_t lead) {
  if (lead < 0x80) return 1;
  if (lead < 0xC2) return 0;
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  if (lead < 0xF5) return 4;
  return 0;
}

}  // namespace ssd
