// Checks on a TokenizerSpec shared by every loader, so a broken vocabulary is reported once, at
// load time, with the file and field named, instead of surfacing as a wrong id during encoding.
#include "runtime/tokenizer/tokenizer_spec.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <unordered_set>

#include "runtime/core/error.h"

namespace ssd {
namespace {

void check_id(const TokenizerSpec& spec, int32_t id, std::string_view field) {
  SSD_CHECK(id >= -1 && id < static_cast<int64_t>(spec.tokens.size()),
            "{}: tokenizer field {} = {} is out of range (vocabulary has {} tokens)", spec.source,
            field, id, spec.tokens.size());
}

}  // namespace

void validate_tokenizer_spec(const TokenizerSpec& spec) {
  const size_t n = spec.tokens.size();
  SSD_CHECK(n > 0, "{}: tokenizer has no tokens", spec.source);
  SSD_CHECK(n < (1u << 31), "{}: tokenizer has too many tokens ({})", spec.source, n);
  SSD_CHECK(spec.scores.empty() || spec.scores.size() == n,
            "{}: tokenizer has {} scores for {} tokens", spec.source, spec.scores.size(), n);
  SSD_CHECK(spec.types.empty() || spec.types.size() == n,
            "{}: tokenizer has {} token types for {} tokens", spec.source, spec.types.size(), n);
  for (size_t i = 0; i < spec.scores.size(); ++i)
    SSD_CHECK(std::isfinite(spec.scores[i]), "{}: token {} has a non-finite score", spec.source, i);
  for (size_t i = 0; i < spec.types.size(); ++i) {
    const auto t = static_cast<int32_t>(spec.types[i]);
    SSD_CHECK(t >= 0 && t <= 6, "{}: token {} has invalid token type {}", spec.source, i, t);
  }
  check_id(spec, spec.bos_id, "bos id");
  check_id(spec, spec.eos_id, "eos id");
  check_id(spec, spec.unk_id, "unknown token id");
  check_id(spec, spec.pad_id, "padding token id");
  for (int32_t id : spec.eog_ids) {
    SSD_CHECK(id >= 0, "{}: end-of-generation id {} is negative", spec.source, id);
    check_id(spec, id, "end-of-generation id");
  }
  SSD_CHECK(!spec.add_bos || spec.bos_id >= 0, "{}: add_bos is set but there is no bos token",
            spec.source);
  SSD_CHECK(!spec.add_eos || spec.eos_id >= 0, "{}: add_eos is set but there is no eos token",
            spec.source);

  if (spec.kind == TokenizerKind::ByteBpe) {
    SSD_CHECK(!spec.merges.empty(), "{}: byte-level BPE tokenizer has no merges", spec.source);
    SSD_CHECK(spec.pre != PreTokenizerKind::None,
              "{}: byte-level BPE tokenizer needs a pre-tokenizer", spec.source);
  } else {
    SSD_CHECK(!spec.merges.empty() || !spec.scores.empty(),
              "{}: SentencePiece BPE tokenizer has neither merges nor scores", spec.source);
  }
  if (spec.merges.empty()) return;

  std::unordered_set<std::string_view> known(spec.tokens.begin(), spec.tokens.end());
  std::string joined;
  for (size_t i = 0; i < spec.merges.size(); ++i) {
    const auto& [a, b] = spec.merges[i];
    SSD_CHECK(known.count(a), "{}: merge {} ('{} {}') refers to unknown token '{}'", spec.source,
              i, a, b, a);
    SSD_CHECK(known.count(b), "{}: merge {} ('{} {}') refers to unknown token '{}'", spec.source,
              i, a, b, b);
    joined.assign(a).append(b);
    SSD_CHECK(known.count(joined), "{}: merge {} ('{} {}') produces unknown token '{}'",
              spec.source, i, a, b, joined);
  }
}

void add_default_eog_ids(TokenizerSpec& spec) {
  static constexpr std::array<std::string_view, 8> kMarkers = {
      "<|im_end|>", "<|eot_id|>",    "<|endoftext|>", "<|end_of_text|>",
      "<|eom_id|>", "<end_of_turn>", "<|end|>",       "</s>"};
  auto add = [&](int32_t id) {
    if (id >= 0 && std::find(spec.eog_ids.begin(), spec.eog_ids.end(), id) == spec.eog_ids.end())
      spec.eog_ids.push_back(id);
  };
  add(spec.eos_id);
  for (size_t i = 0; i < spec.tokens.size(); ++i) {
    const TokenType t = spec.types.empty() ? TokenType::Normal : spec.types[i];
    if (t != TokenType::Control && t != TokenType::UserDefined) continue;
    if (std::find(kMarkers.begin(), kMarkers.end(), spec.tokens[i]) != kMarkers.end())
      add(static_cast<int32_t>(i));
  }
}

std::string_view pre_tokenizer_name(PreTokenizerKind kind) {
  switch (kind) {
    case PreTokenizerKind::None: return "none";
    case PreTokenizerKind::Gpt2: return "gpt2";
    case PreTokenizerKind::Llama3: return "llama3";
    case PreTokenizerKind::Qwen2: return "qwen2";
    case PreTokenizerKind::SmolLM: return "smollm";
  }
  return "?";
}

}  // namespace ssd
