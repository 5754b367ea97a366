// Pre-tokenizers: split text into the "words" that BPE then encodes one at a time. Each kind is a
// hand-written scanner equivalent to the regex its tokenizer family is defined by (see
// PreTokenizerKind): at each position the regex alternatives are tried in order, including the
// backtracking of \s+(?!\S) and \s*[\r\n]+, so the pieces are exactly the regex matches. A
// scanner rather than a regex engine keeps the dependency list short and runs at tens of MB/s.
#pragma once

#include <string_view>
#include <vector>

#include "runtime/tokenizer/tokenizer_spec.h"

namespace ssd {

// Appends to `out` the pieces of `text`, in order; they are views into `text` and their
// concatenation is exactly `text`. PreTokenizerKind::None yields `text` as one piece.
void pre_tokenize(PreTokenizerKind kind, std::string_view text,
                  std::vector<std::string_view>& out);

}  // namespace ssd
