// Byte trie over the special tokens' texts (see special_tokens.h). Vocabularies have from a dozen
// to a few hundred such tokens, so children are small vectors scanned linearly.
#include "runtime/tokenizer/special_tokens.h"

namespace ssd {

void SpecialTokenMatcher::add(std::string_view text, int32_t id, bool always) {
  if (text.empty()) return;
  int32_t cur = 0;
  for (char ch : text) {
    const auto b = static_cast<unsigned char>(ch);
    int32_t child = -1;
    for (const auto& [byte, idx] : nodes_[cur].next)
      if (byte == b) child = idx;
    if (child < 0) {
      child = static_cast<int32_t>(nodes_.size());
      nodes_[cur].next.emplace_back(b, child);
      nodes_.emplace_back();
    }
    cur = child;
  }
  // Duplicated texts keep the first id, as the vocabulary lookup does.
  if (nodes_[cur].id < 0) {
    nodes_[cur].id = id;
    nodes_[cur].always = always;
  }
  first_[static_cast<unsigned char>(text[0])] = true;
}

SpecialTokenMatcher::Match SpecialTokenMatcher::match(std::string_view text, size_t pos,
                                                      bool parse_special) const {
  Match best;
  int32_t cur = 0;
  for (size_t i = pos; i < text.size(); ++i) {
    const auto b = static_cast<unsigned char>(text[i]);
    int32_t child = -1;
    for (const auto& [byte, idx] : nodes_[cur].next)
      if (byte == b) child = idx;
    if (child < 0) break;
    cur = child;
    const Node& n = nodes_[cur];
    if (n.id >= 0 && (parse_special || n.always)) best = {i + 1 - pos, n.id};
  }
  return best;
}

}  // namespace ssd
