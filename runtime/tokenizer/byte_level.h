// The GPT-2 byte-to-unicode alphabet used by byte-level BPE vocabularies. Printable bytes
// ('!'..'~', U+00A1..U+00AC, U+00AE..U+00FF) stand for themselves; the other 68 bytes (controls,
// space, DEL, NBSP, soft hyphen, ...) are shifted to U+0100 onwards in byte order, so a space is
// 'Ġ' (U+0120) and a newline 'Ċ' (U+010A). Vocabulary strings are written in this alphabet, which
// is why every byte string has a representation and decoding is exact.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace ssd {

// The code point standing for byte b.
uint32_t byte_level_codepoint(uint8_t b);

// The UTF-8 text of byte b in the alphabet (1 or 2 bytes).
std::string byte_level_char(uint8_t b);

// Maps vocabulary text back to raw bytes. Characters outside the alphabet (which a well-formed
// vocabulary does not contain) are copied through unchanged.
std::string byte_level_decode(std::string_view text);

}  // namespace ssd
