#include "runtime/drafters/spelling_classes.h"

#include <unordered_map>

namespace ssd {
namespace {

// The text without one leading space marker, ASCII letters lowered.
std::string spelling(const std::string& token) {
  // "Ġ" (U+0120, byte-level BPE) and "▁" (U+2581, SentencePiece), in UTF-8.
  static const std::string kMarkers[] = {"\xC4\xA0", "\xE2\x96\x81"};
  std::string s = token;
  for (const std::string& m : kMarkers)
    if (s.compare(0, m.size(), m) == 0) {
      s.erase(0, m.size());
      break;
    }
  for (char& c : s)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return s;
}

}  // namespace

std::vector<int32_t> spelling_classes(std::span<const std::string> tokens) {
  std::vector<int32_t> cls(tokens.size());
  std::unordered_map<std::string, int32_t> first;  // spelling -> smallest id
  for (size_t i = 0; i < tokens.size(); ++i) {
    const int32_t id = static_cast<int32_t>(i);
    const std::string s = spelling(tokens[i]);
    cls[i] = s.empty() ? id : first.emplace(s, id).first->second;
  }
  return cls;
}

}  // namespace ssd
