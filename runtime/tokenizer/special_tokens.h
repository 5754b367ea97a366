// Finds special and added tokens written literally in text ("<|im_start|>", "<s>"), longest
// match first, so that such text maps straight to its id instead of being split by BPE. Control
// tokens are only honoured when the caller asks to parse specials (prompt templates), while
// user-defined tokens are plain vocabulary additions and always match; a byte trie lets one walk
// find the longest match of either sort.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

namespace ssd {

class SpecialTokenMatcher {
 public:
  // `always`: matched even when specials are not parsed (user-defined tokens).
  void add(std::string_view text, int32_t id, bool always);

  struct Match {
    size_t len = 0;  // 0: no match
    int32_t id = -1;
  };
  // The longest token starting at text[pos]; with parse_special false, only `always` ones.
  Match match(std::string_view text, size_t pos, bool parse_special) const;

  // Cheap pre-check: can any token start with this byte?
  bool may_start(unsigned char b) const { return first_[b]; }

 private:
  struct Node {
    std::vector<std::pair<unsigned char, int32_t>> next;  // (byte, node index)
    int32_t id = -1;
    bool always = false;
  };
  std::vector<Node> nodes_{1};  // nodes_[0] is the root
  std::array<bool, 256> first_{};
};

}  // namespace ssd
