// The project's one non-cryptographic hash: 64-bit FNV-1a. It names contents that must agree
// across ranks and runs (a configuration or model digest in the handshake, a vocabulary
// fingerprint, a dataset's source model), so it must be stable across machines and builds: no
// seed, byte order fixed by the caller. Not for anything an adversary chooses.
#pragma once

#include <cstdint>
#include <string_view>

namespace ssd {

inline constexpr uint64_t kFnv1aOffset = 0xcbf29ce484222325ull;  // 64-bit offset basis
inline constexpr uint64_t kFnv1aPrime = 0x100000001b3ull;        // 64-bit prime

// h with one more byte mixed in; start from kFnv1aOffset.
constexpr uint64_t fnv1a_byte(uint64_t h, unsigned char byte) {
  return (h ^ byte) * kFnv1aPrime;
}

// h with every byte of `text` mixed in, in order.
constexpr uint64_t fnv1a(std::string_view text, uint64_t h = kFnv1aOffset) {
  for (char c : text) h = fnv1a_byte(h, static_cast<unsigned char>(c));
  return h;
}

}  // namespace ssd
