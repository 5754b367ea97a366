#include "runtime/drafters/vocab_fingerprint.h"

#include <fmt/format.h>

#include "runtime/core/hash.h"

namespace ssd {
namespace {

// The length goes in first so that {"ab", "c"} and {"a", "bc"} hash differently.
template <typename Texts>
VocabFingerprint fingerprint(std::string source, const Texts& tokens) {
  VocabFingerprint f;
  f.source = std::move(source);
  f.count = static_cast<int64_t>(tokens.size());
  uint64_t h = kFnv1aOffset;
  for (const auto& t : tokens) {
    uint64_t len = t.size();
    for (int i = 0; i < 8; ++i) h = fnv1a_byte(h, static_cast<unsigned char>(len >> (8 * i)));
    h = fnv1a(t, h);
  }
  f.hash = h;
  return f;
}

}  // namespace

VocabFingerprint VocabFingerprint::of(std::string source, const std::vector<std::string>& tokens) {
  return fingerprint(std::move(source), tokens);
}

VocabFingerprint VocabFingerprint::of(std::string source,
                                      const std::vector<std::string_view>& tokens) {
  return fingerprint(std::move(source), tokens);
}

std::string VocabFingerprint::describe() const {
  return fmt::format("{} tokens, hash {:#018x}", count, hash);
}

}  // namespace ssd
