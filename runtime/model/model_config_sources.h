// Reading a ModelConfig out of the two metadata sources: GGUF `<arch>.*` keys and a Hugging Face
// config.json. Both throw ssd::Error naming the file and the missing or bad field.
#pragma once

#include <string>

#include "runtime/io/gguf_file.h"
#include "runtime/model/model_config.h"

namespace ssd {

// GGUF Llama-family metadata. `vocab_fallback` is used when `<arch>.vocab_size` is absent (the
// token list length). GGUF Llama stores Q/K rows permuted for the interleaved RoPE layout.
ModelConfig config_from_gguf(const GgufFile& f, int64_t vocab_fallback);

// config.json of a Hugging Face checkpoint (model_type llama, mistral, qwen2 or qwen3).
ModelConfig config_from_hf_json(const std::string& config_json_path);

}  // namespace ssd
