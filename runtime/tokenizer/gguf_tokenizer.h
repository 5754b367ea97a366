// TokenizerSpec from a GGUF file's tokenizer.ggml.* metadata (and tokenizer.chat_template).
#pragma once

#include "runtime/io/gguf_file.h"
#include "runtime/tokenizer/tokenizer_spec.h"

namespace ssd {

// Keys read: tokenizer.ggml.model ("gpt2" = byte-level BPE, "llama" = SentencePiece BPE), .pre,
// .tokens, .scores, .token_type, .merges, .{bos,eos,unknown,padding,eot,eom}_token_id,
// .add_bos_token, .add_eos_token, .add_space_prefix, tokenizer.chat_template. Throws ssd::Error
// naming the file and key for a missing required key, an unsupported model/pre value or an
// inconsistent vocabulary. The result has been validated.
TokenizerSpec tokenizer_spec_from_gguf(const GgufFile& gguf);

// The pre-tokenizer for a tokenizer.ggml.pre name; ssd::Error (naming `source` and the name,
// and listing the supported ones) for any other.
PreTokenizerKind pre_tokenizer_from_gguf_name(std::string_view name, const std::string& source);

}  // namespace ssd
