#include "actors/roles/model_session.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include "actors/roles/backend_choice.h"
#include "runtime/core/error.h"
#include "runtime/tokenizer/gguf_tokenizer.h"
#include "runtime/tokenizer/hf_tokenizer.h"

namespace ssd {

Tokenizer load_tokenizer(const ModelFile& file) {
  if (file.gguf()) return Tokenizer(tokenizer_spec_from_gguf(*file.gguf()));
  const auto path = std::filesystem::path(file.safetensors()->directory()) / "tokenizer.json";
  SSD_CHECK(std::filesystem::exists(path), "{}: no tokenizer.json beside the checkpoint",
            file.path());
  return Tokenizer(tokenizer_spec_from_hf_file(path.string()));
}

ModelSession::ModelSession(const SessionOptions& opts) {
  backend_summary_ = opts.backend.summary();
  file_ = std::make_unique<ModelFile>(ModelFile::open(opts.model_path));
  tokenizer_ = std::make_unique<Tokenizer>(load_tokenizer(*file_));
  const ModelConfig& c = file_->config();
  SSD_CHECK(tokenizer_->vocab_size() <= c.vocab,
            "{}: the tokenizer has {} tokens but the model's vocabulary is {}", opts.model_path,
            tokenizer_->vocab_size(), c.vocab);
  SSD_CHECK(opts.ctx_size >= 0, "--ctx-size {} must not be negative", opts.ctx_size);
  ctx_size_ = opts.ctx_size > 0 ? opts.ctx_size : std::min<int64_t>(c.context_length, 4096);
  SSD_CHECK(ctx_size_ <= c.context_length,
            "--ctx-size {} exceeds the model's trained context length {}", ctx_size_,
            c.context_length);
  backend_ = make_backend(opts.backend, opts.threads);
  if (opts.tp_group)
    model_ = std::make_unique<Transformer>(*file_, *backend_,
                                           make_tp_context(*file_, *opts.tp_group, opts.tp_mode));
  else
    model_ = std::make_unique<Transformer>(*file_, *backend_);
  kv_ = std::make_unique<KvCache>(model_->kv_config(ctx_size_));
  picker_ = make_token_picker(opts.backend, *backend_);
}

}  // namespace ssd
