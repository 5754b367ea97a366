// Strict UTF-8 decoding (RFC 3629 ranges) and ICU-backed character classes. ASCII, which is most
// of the text we see, is classified from a table built once; the rest asks ICU.
#include "runtime/tokenizer/unicode_text.h"

#include <unicode/uchar.h>

#include <array>

namespace ssd {
namespace {

bool is_cont(uint8_t b) { return (b & 0xC0) == 0x80; }

CharClass icu_class(uint32_t cp) {
  const auto c = static_cast<UChar32>(cp);
  switch (u_charType(c)) {
    case U_UPPERCASE_LETTER:
    case U_LOWERCASE_LETTER:
    case U_TITLECASE_LETTER:
    case U_MODIFIER_LETTER:
    case U_OTHER_LETTER:
      return CharClass::Letter;
    case U_DECIMAL_DIGIT_NUMBER:
    case U_LETTER_NUMBER:
    case U_OTHER_NUMBER:
      return CharClass::Number;
    default:
      return u_isUWhiteSpace(c) ? CharClass::Space : CharClass::Other;
  }
}

const std::array<CharClass, 128>& ascii_classes() {
  static const std::array<CharClass, 128> table = [] {
    std::array<CharClass, 128> t{};
    for (uint32_t c = 0; c < 128; ++c) t[c] = icu_class(c);
    return t;
  }();
  return table;
}

}  // namespace

Utf8Char decode_utf8(std::string_view s, size_t pos) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data()) + pos;
  const size_t avail = s.size() - pos;
  const uint8_t b0 = p[0];
  const uint32_t len = utf8_sequence_length(b0);
  const Utf8Char invalid{kInvalidCodePoint, 1};
  if (len == 1) return {b0, 1};
  if (len == 0 || avail < len) return invalid;
  for (uint32_t i = 1; i < len; ++i)
    if (!is_cont(p[i])) return invalid;
  if (len == 2) return {(b0 & 0x1Fu) << 6 | (p[1] & 0x3Fu), 2};
  if (len == 3) {
    // E0 needs a second byte >= A0 (no overlongs); ED < A0 (no surrogates).
    if ((b0 == 0xE0 && p[1] < 0xA0) || (b0 == 0xED && p[1] >= 0xA0)) return invalid;
    return {(b0 & 0x0Fu) << 12 | (p[1] & 0x3Fu) << 6 | (p[2] & 0x3Fu), 3};
  }
  // F0 needs >= 90 (no overlongs); F4 < 90 (nothing above U+10FFFF).
  if ((b0 == 0xF0 && p[1] < 0x90) || (b0 == 0xF4 && p[1] >= 0x90)) return invalid;
  return {(b0 & 0x07u) << 18 | (p[1] & 0x3Fu) << 12 | (p[2] & 0x3Fu) << 6 | (p[3] & 0x3Fu), 4};
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

CharClass char_class(uint32_t cp) {
  if (cp < 128) return ascii_classes()[cp];
  if (cp == kInvalidCodePoint) return CharClass::Other;
  return icu_class(cp);
}

}  // namespace ssd
