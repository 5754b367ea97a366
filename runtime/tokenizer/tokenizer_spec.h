// A vocabulary described independently of the file it came from. The GGUF reader and the Hugging
// Face tokenizer.json reader both produce a TokenizerSpec; the Tokenizer consumes only this, so
// the two file formats cannot drift into two tokenizer implementations. It is a plain value:
// loaders fill it, validate_tokenizer_spec() checks it, and tests can build one by hand.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ssd {

// How text becomes the symbols that BPE merges.
enum class TokenizerKind : uint8_t {
  ByteBpe,  // GPT-2 style: every byte maps to a printable code point; merges by rank
  SpmBpe,   // SentencePiece style: "▁" stands for a space, byte fallback tokens <0xXX>
};

// The splitter run before byte-level BPE (each named after the regex it is equivalent to).
enum class PreTokenizerKind : uint8_t {
  None,    // no splitting (SentencePiece: the whole text is one word)
  Gpt2,    // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  Llama3,  // case-insensitive contractions, [^\r\n\p{L}\p{N}]?\p{L}+, \p{N}{1,3}, ...
  Qwen2,   // as Llama3 but numbers are split into single digits (\p{N})
  SmolLM,  // every \p{N} isolated first, then Gpt2 on the rest
};

// Token types, GGUF numbering (tokenizer.ggml.token_type).
enum class TokenType : int32_t {
  Undefined = 0,  // treated as Normal
  Normal = 1,
  Unknown = 2,
  Control = 3,      // special tokens: <s>, <|im_start|>, ...; matched only when parsing specials
  UserDefined = 4,  // added text tokens, always matched literally
  Unused = 5,
  Byte = 6,  // SentencePiece byte fallback, text "<0xXX>"
};

struct TokenizerSpec {
  std::string source;  // file the spec came from; named in every error message
  TokenizerKind kind = TokenizerKind::ByteBpe;
  PreTokenizerKind pre = PreTokenizerKind::Gpt2;

  std::vector<std::string> tokens;  // [n_vocab] token text (byte-level alphabet for ByteBpe)
  std::vector<float> scores;        // [n_vocab] or empty; SpmBpe merge priority when no merges
  std::vector<TokenType> types;     // [n_vocab] or empty (all Normal)
  // Merge rules in rank order (first = applied first), as (left, right) token texts.
  std::vector<std::pair<std::string, std::string>> merges;

  int32_t bos_id = -1;  // -1: the vocabulary has no such token
  int32_t eos_id = -1;
  int32_t unk_id = -1;
  int32_t pad_id = -1;
  std::vector<int32_t> eog_ids;  // ids that end generation (eos, <|im_end|>, <|eot_id|>, ...)

  bool add_bos = false;           // encode(..., add_bos=true) prepends bos_id only if this is set
  bool add_eos = false;           // likewise appends eos_id
  bool add_space_prefix = false;  // SpmBpe: "▁" before the text and after each special token
  bool ignore_merges = false;     // a word that is itself a token is emitted without merging

  std::string chat_template;  // the model's Jinja template text (may be empty)
};

// Throws ssd::Error (naming spec.source and the field) unless: tokens non-empty; scores and types
// empty or one per token; special ids and eog ids in range; every merge side and every merged
// result is a known token; ByteBpe has merges; SpmBpe has merges or scores.
void validate_tokenizer_spec(const TokenizerSpec& spec);

// Adds to spec.eog_ids (without duplicates) eos_id and every control/user-defined token whose text
// is a well-known end-of-turn marker (<|im_end|>, <|eot_id|>, <|endoftext|>, ...).
void add_default_eog_ids(TokenizerSpec& spec);

std::string_view pre_tokenizer_name(PreTokenizerKind kind);

}  // namespace ssd
