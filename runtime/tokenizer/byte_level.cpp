// Tables for the byte-level alphabet, built once from the rule in byte_level.h.
#include "runtime/tokenizer/byte_level.h"

#include <array>

#include "runtime/tokenizer/unicode_text.h"

namespace ssd {
namespace {

bool stands_for_itself(uint32_t b) {
  return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

struct Tables {
  std::array<uint32_t, 256> to_cp{};
  std::array<int16_t, 324> from_cp{};  // code points 0..323 cover the whole alphabet; -1 = none
};

const Tables& tables() {
  static const Tables t = [] {
    Tables r;
    r.from_cp.fill(-1);
    uint32_t next = 256;
    for (uint32_t b = 0; b < 256; ++b) {
      r.to_cp[b] = stands_for_itself(b) ? b : next++;
      r.from_cp[r.to_cp[b]] = static_cast<int16_t>(b);
    }
    return r;
  }();
  return t;
}

}  // namespace

uint32_t byte_level_codepoint(uint8_t b) { return tables().to_cp[b]; }

std::string byte_level_char(uint8_t b) {
  std::string s;
  append_utf8(s, byte_level_codepoint(b));
  return s;
}

std::string byte_level_decode(std::string_view text) {
  const Tables& t = tables();
  std::string out;
  out.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    const Utf8Char u = decode_utf8(text, pos);
    if (u.cp < t.from_cp.size() && t.from_cp[u.cp] >= 0)
      out.push_back(static_cast<char>(t.from_cp[u.cp]));
    else
      out.append(text.substr(pos, u.len));
    pos += u.len;
  }
  return out;
}

}  // namespace ssd
