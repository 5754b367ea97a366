// TokenizerSpec from a Hugging Face tokenizer.json (model type BPE), plus tokenizer_config.json
// when present for add_bos_token / add_eos_token / the special token names / chat_template.
#pragma once

#include <string>
#include <string_view>

#include "runtime/tokenizer/tokenizer_spec.h"

namespace ssd {

// Reads `tokenizer_json_path` and, if it exists, tokenizer_config.json in the same directory.
TokenizerSpec tokenizer_spec_from_hf_file(const std::string& tokenizer_json_path);

// The same from in-memory texts; `config_json` may be empty (no config). The names are used in
// error messages. Recognised structures:
//   byte-level: pre_tokenizer ByteLevel(use_regex) [GPT-2], Sequence[Split(Regex known pattern),
//               ByteLevel(use_regex=false)] [GPT-2, Llama 3, Qwen2], Sequence[Digits(individual),
//               ByteLevel(use_regex)] [SmolLM2]; no normalizer.
//   SentencePiece: normalizer [Prepend("▁"),] Replace(" ", "▁"), or pre_tokenizer Metaspace
//               (split=false); byte_fallback for <0xXX> tokens.
// Anything else is an ssd::Error naming the file and the field, never a guess.
TokenizerSpec tokenizer_spec_from_hf_json(std::string_view tokenizer_json,
                                          std::string_view config_json,
                                          const std::string& tokenizer_name,
                                          const std::string& config_name);

}  // namespace ssd
