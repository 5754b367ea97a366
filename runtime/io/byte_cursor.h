// Bounds-checked little-endian reader over an in-memory byte range (a mapped model file). Every
// read checks the remaining length first and throws ssd::Error naming the field being read and its
// byte position (the parser adds the file name and context), so parsers never index past the end
// whatever the file says. Values are assembled byte by byte: host alignment and endianness never
// matter. Also: overflow-checked arithmetic and a printable rendering of untrusted names.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "runtime/core/error.h"

namespace ssd::io {

class ByteCursor {
 public:
  ByteCursor(const uint8_t* data, uint64_t size) : data_(data), size_(size) {}

  uint64_t pos() const { return pos_; }
  uint64_t size() const { return size_; }
  uint64_t remaining() const { return size_ - pos_; }
  const uint8_t* here() const { return data_ + pos_; }

  // Throws unless n more bytes are available for `field`.
  void need(uint64_t n, std::string_view field) const {
    SSD_CHECK(n <= remaining(), "truncated file: {} needs {} bytes at offset {}, only {} left",
              field, n, pos_, remaining());
  }

  void skip(uint64_t n, std::string_view field) {
    need(n, field);
    pos_ += n;
  }

  uint8_t u8(std::string_view field) { return static_cast<uint8_t>(le(1, field)); }
  uint16_t u16(std::string_view field) { return static_cast<uint16_t>(le(2, field)); }
  uint32_t u32(std::string_view field) { return static_cast<uint32_t>(le(4, field)); }
  uint64_t u64(std::string_view field) { return le(8, field); }

  // A view of the next n bytes; the view points into the underlying memory.
  std::string_view bytes(uint64_t n, std::string_view field) {
    need(n, field);
    std::string_view s(reinterpret_cast<const char*>(data_ + pos_), static_cast<size_t>(n));
    pos_ += n;
    return s;
  }

 private:
  uint64_t le(unsigned n, std::string_view field) {
    need(n, field);
    uint64_t v = 0;
    for (unsigned i = 0; i < n; ++i) v |= static_cast<uint64_t>(data_[pos_ + i]) << (8 * i);
    pos_ += n;
    return v;
  }

  const uint8_t* data_;
  uint64_t size_;
  uint64_t pos_ = 0;
};

// *out = a * b (or a + b); false on overflow, and the caller reports the field.
inline bool mul_ok(uint64_t a, uint64_t b, uint64_t* out) { return !__builtin_mul_overflow(a, b, out); }
inline bool add_ok(uint64_t a, uint64_t b, uint64_t* out) { return !__builtin_add_overflow(a, b, out); }

// An untrusted name (tensor name, metadata key) made safe to print in an error message:
// non-printable bytes become \xNN and long names are cut at 96 bytes.
inline std::string printable(std::string_view s) {
  std::string out;
  const size_t n = s.size() < 96 ? s.size() : 96;
  for (size_t i = 0; i < n; ++i) {
    const auto ch = static_cast<unsigned char>(s[i]);
    if (ch >= 0x20 && ch < 0x7f && ch != '\\')
      out += static_cast<char>(ch);
    else
      out += fmt::format("\\x{:02x}", ch);
  }
  if (n < s.size()) out += fmt::format("...({} bytes)", s.size());
  return out;
}

}  // namespace ssd::io
