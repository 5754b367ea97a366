// Incremental detokenization for generation: tokens arrive one at a time and a token may carry
// only part of a multi-byte character (byte-level BPE splits emoji and CJK across tokens;
// SentencePiece emits <0xXX> byte tokens). push() returns only text that ends on a complete UTF-8
// character and holds back the trailing partial sequence (at most 3 bytes) until it completes.
#pragma once

#include <cstdint>
#include <string>

#include "runtime/tokenizer/tokenizer.h"

namespace ssd {

class StreamDecoder {
 public:
  // skip_special: control/unknown tokens produce no text (the usual choice for generated output).
  explicit StreamDecoder(const Tokenizer& tok, bool skip_special = true)
      : tok_(&tok), skip_special_(skip_special) {}

  // Text completed by token `id` (may be empty). Throws ssd::Error for an id out of range.
  std::string push(int32_t id);

  // Whatever is held back, as is (an incomplete sequence at end of stream), and resets.
  std::string flush();

  size_t pending_bytes() const { return pending_.size(); }

 private:
  const Tokenizer* tok_;
  bool skip_special_;
  std::string pending_;  // bytes of an incomplete trailing UTF-8 sequence
};

}  // namespace ssd
