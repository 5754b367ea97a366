// Text <-> token ids for BPE vocabularies (byte-level as GPT-2 / Llama 3 / Qwen / SmolLM2, and
// SentencePiece-style as Llama 2), built from a TokenizerSpec whatever file it came from.
//
// encode: split off literal special tokens (longest match), pre-tokenize the text between them
// (byte-level) or mark spaces with "▁" (SentencePiece), run BPE per word, then add BOS/EOS as
// the vocabulary asks. decode: concatenate each token's bytes; byte-level decoding is exact, so
// decode(encode(s)) == s for any bytes s, provided the vocabulary has a token for every byte
// (a byte without one is dropped, as the reference implementation does: SmolLM2 lacks 0x04,
// 0xF1, 0xF2, ...). Words seen before are served from a bounded cache.
//
// Thread safety: all const members may be called concurrently (the word cache is locked).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/tokenizer/tokenizer_spec.h"

namespace ssd {

class Tokenizer {
 public:
  // Validates the spec (ssd::Error naming spec.source on failure) and builds the lookup tables.
  explicit Tokenizer(TokenizerSpec spec);
  ~Tokenizer();
  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // add_bos: add the vocabulary's automatic specials (BOS if spec.add_bos, EOS if spec.add_eos);
  // a BOS already produced by the text itself is not doubled. parse_special: control tokens
  // written in the text ("<|im_start|>") become their ids; otherwise they are encoded as text.
  // User-defined tokens always match.
  std::vector<int32_t> encode(std::string_view text, bool add_bos, bool parse_special) const;

  // Concatenated bytes of the tokens; skip_special drops control and unknown tokens. For a
  // SentencePiece vocabulary with add_space_prefix, one leading space is removed (the inverse of
  // the prefix encode adds). Throws ssd::Error for an id out of range.
  std::string decode(std::span<const int32_t> ids, bool skip_special = false) const;

  // Bytes token `id` stands for (may be an incomplete UTF-8 sequence). Throws if out of range.
  const std::string& piece(int32_t id) const;
  // The token's vocabulary text (byte-level alphabet, "▁", "<0x0A>" as stored).
  const std::string& token_text(int32_t id) const;
  std::optional<int32_t> find_token(std::string_view text) const;

  bool is_eog(int32_t id) const;
  bool is_special(int32_t id) const;  // control or unknown token
  TokenType token_type(int32_t id) const;

  int32_t vocab_size() const;
  int32_t bos() const;  // -1 when absent
  int32_t eos() const;
  int32_t unk() const;
  int32_t pad() const;
  const TokenizerSpec& spec() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ssd
