// Spelling classes of a vocabulary: tokens that spell one word but for a leading space and the
// case of ASCII letters share a class (" The", "the", "The": in a byte-level BPE vocabulary
// "ĠThe", "the", "The"; SentencePiece writes the space "▁"). The suffix drafter uses them
// where its lookup finds nothing: a token the text never had may have had a spelling of it, and
// what followed that is a guess for what follows now (suffix_drafter.h).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace ssd {

// [tokens.size()] each token's class: the smallest id with the same text once one leading space
// marker ("Ġ" or "▁") is dropped and ASCII letters are lowered. A token that is nothing but a
// marker, or empty, is a class of its own.
std::vector<int32_t> spelling_classes(std::span<const std::string> tokens);

}  // namespace ssd
