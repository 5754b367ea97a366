// A vocabulary reduced to what "the same tokenizer" means for speculative decoding: token id i
// stands for the same text in draft and target. Comparing a count and a 64-bit hash of the id-
// ordered token texts catches a different vocabulary (size, order, or any token's text) without
// keeping two 50k-string lists around, and keeps the drafters free of the tokenizer library: the
// caller builds both fingerprints from whatever loaded the tokenizers (TokenizerSpec::tokens, or
// GGUF tokenizer.ggml.tokens), through the same function, so the two sides hash identically.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ssd {

struct VocabFingerprint {
  std::string source;  // the file the vocabulary came from (named in mismatch errors)
  int64_t count = 0;   // number of token texts
  uint64_t hash = 0;   // FNV-1a 64 over (length, bytes) of every text in id order

  static VocabFingerprint of(std::string source, const std::vector<std::string>& tokens);
  static VocabFingerprint of(std::string source, const std::vector<std::string_view>& tokens);

  bool same_vocab(const VocabFingerprint& o) const { return count == o.count && hash == o.hash; }
  // "49152 tokens, hash 0x1234abcd..." for messages.
  std::string describe() const;
};

}  // namespace ssd
