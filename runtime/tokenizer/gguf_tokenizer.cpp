// Reading tokenizer.ggml.* into a TokenizerSpec. Defaults for absent optional keys follow the
// GGUF convention for each model family: SentencePiece vocabularies add BOS and a space prefix,
// byte-level ones add neither; a byte-level file without a .pre key predates that key and used
// the GPT-2 split.
#include "runtime/tokenizer/gguf_tokenizer.h"

#include <array>

#include "runtime/core/error.h"

namespace ssd {

PreTokenizerKind pre_tokenizer_from_gguf_name(std::string_view name, const std::string& source) {
  struct Entry {
    std::string_view name;
    PreTokenizerKind kind;
  };
  static constexpr std::array<Entry, 6> kNames = {{
      {"default", PreTokenizerKind::Gpt2},
      {"gpt2", PreTokenizerKind::Gpt2},
      {"llama-bpe", PreTokenizerKind::Llama3},
      {"llama3", PreTokenizerKind::Llama3},
      {"qwen2", PreTokenizerKind::Qwen2},
      {"smollm", PreTokenizerKind::SmolLM},
  }};
  for (const Entry& e : kNames)
    if (e.name == name) return e.kind;
  fail(fmt::format("{}: unsupported tokenizer.ggml.pre '{}' (supported: default, gpt2, llama-bpe, "
                   "llama3, qwen2, smollm)",
                   source, name));
}

TokenizerSpec tokenizer_spec_from_gguf(const GgufFile& g) {
  TokenizerSpec s;
  s.source = g.path();
  auto require = [&](auto opt, std::string_view key) {
    SSD_CHECK(opt.has_value(), "{}: missing metadata key '{}'", g.path(), key);
    return *std::move(opt);
  };

  const std::string_view model = require(g.get_string("tokenizer.ggml.model"), "tokenizer.ggml.model");
  if (model == "gpt2") {
    s.kind = TokenizerKind::ByteBpe;
    const auto pre = g.get_string("tokenizer.ggml.pre");
    s.pre = pre ? pre_tokenizer_from_gguf_name(*pre, g.path()) : PreTokenizerKind::Gpt2;
    s.ignore_merges = s.pre == PreTokenizerKind::Llama3;  // as Llama 3's tokenizer.json says
  } else if (model == "llama") {
    s.kind = TokenizerKind::SpmBpe;
    s.pre = PreTokenizerKind::None;
  } else {
    fail(fmt::format("{}: unsupported tokenizer.ggml.model '{}' (supported: gpt2, llama)",
                     g.path(), model));
  }
  const bool spm = s.kind == TokenizerKind::SpmBpe;

  for (std::string_view t : require(g.get_string_array("tokenizer.ggml.tokens"), "tokenizer.ggml.tokens"))
    s.tokens.emplace_back(t);
  const size_t n = s.tokens.size();
  if (auto sc = g.get_float_array("tokenizer.ggml.scores")) {
    SSD_CHECK(sc->size() == n, "{}: tokenizer.ggml.scores has {} entries for {} tokens", g.path(),
              sc->size(), n);
    s.scores.assign(sc->begin(), sc->end());
  } else {
    SSD_CHECK(!spm, "{}: missing metadata key 'tokenizer.ggml.scores' (needed by a SentencePiece "
                    "vocabulary)", g.path());
  }
  if (auto ty = g.get_int_array("tokenizer.ggml.token_type")) {
    SSD_CHECK(ty->size() == n, "{}: tokenizer.ggml.token_type has {} entries for {} tokens",
              g.path(), ty->size(), n);
    for (size_t i = 0; i < n; ++i) {
      const int64_t t = (*ty)[i];
      SSD_CHECK(t >= 0 && t <= 6, "{}: tokenizer.ggml.token_type[{}] = {} is not a token type",
                g.path(), i, t);
      s.types.push_back(static_cast<TokenType>(t));
    }
  }
  if (auto merges = g.get_string_array("tokenizer.ggml.merges")) {
    s.merges.reserve(merges->size());
    for (size_t i = 0; i < merges->size(); ++i) {
      const std::string_view m = (*merges)[i];
      const size_t sp = m.find(' ');
      SSD_CHECK(sp != std::string_view::npos && sp > 0 && sp + 1 < m.size() &&
                    m.find(' ', sp + 1) == std::string_view::npos,
                "{}: tokenizer.ggml.merges[{}] = '{}' is not 'left right'", g.path(), i, m);
      s.merges.emplace_back(std::string(m.substr(0, sp)), std::string(m.substr(sp + 1)));
    }
  } else {
    SSD_CHECK(spm, "{}: missing metadata key 'tokenizer.ggml.merges' (needed by a byte-level "
                   "BPE vocabulary)", g.path());
  }

  auto id = [&](std::string_view key) -> int32_t {
    const auto v = g.get_int(key);
    if (!v) return -1;
    SSD_CHECK(*v >= 0 && *v < static_cast<int64_t>(n), "{}: {} = {} is out of range ({} tokens)",
              g.path(), key, *v, n);
    return static_cast<int32_t>(*v);
  };
  s.bos_id = id("tokenizer.ggml.bos_token_id");
  s.eos_id = id("tokenizer.ggml.eos_token_id");
  s.unk_id = id("tokenizer.ggml.unknown_token_id");
  s.pad_id = id("tokenizer.ggml.padding_token_id");
  for (std::string_view key : {"tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"})
    if (int32_t e = id(key); e >= 0) s.eog_ids.push_back(e);
  add_default_eog_ids(s);

  s.add_bos = g.get_bool("tokenizer.ggml.add_bos_token").value_or(spm) && s.bos_id >= 0;
  s.add_eos = g.get_bool("tokenizer.ggml.add_eos_token").value_or(false) && s.eos_id >= 0;
  s.add_space_prefix = spm && g.get_bool("tokenizer.ggml.add_space_prefix").value_or(true);
  if (auto t = g.get_string("tokenizer.chat_template")) s.chat_template = std::string(*t);

  validate_tokenizer_spec(s);
  return s;
}

}  // namespace ssd
