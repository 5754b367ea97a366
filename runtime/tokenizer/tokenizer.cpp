// Tokenizer tables and the encode/decode paths (design in tokenizer.h). Everything derived from
// the spec is computed once here: text->id map, per-token output bytes, the merge table (from
// the merges list, or from SentencePiece scores), the byte tokens, and the special-token trie.
#include "runtime/tokenizer/tokenizer.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <map>
#include <mutex>
#include <unordered_map>

#include "runtime/core/error.h"
#include "runtime/tokenizer/bpe_merges.h"
#include "runtime/tokenizer/byte_level.h"
#include "runtime/tokenizer/pre_tokenizer.h"
#include "runtime/tokenizer/special_tokens.h"
#include "runtime/tokenizer/unicode_text.h"

namespace ssd {
namespace {

constexpr std::string_view kSpmSpace = "\xE2\x96\x81";  // U+2581 '▁'
constexpr size_t kMaxCachedWord = 128;                   // bytes; longer words are not cached
constexpr size_t kMaxCacheEntries = 1 << 16;             // cleared wholesale when full

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using TextMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;
using WordCache = std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>>;

// "<0xAB>" -> 0xAB, or -1.
int parse_byte_token(std::string_view t) {
  if (t.size() != 6 || t.substr(0, 3) != "<0x" || t[5] != '>') return -1;
  auto hex = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  const int hi = hex(t[3]), lo = hex(t[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

std::string replace_all(std::string_view s, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(s.size());
  for (size_t pos = 0;;) {
    const size_t hit = s.find(from, pos);
    if (hit == std::string_view::npos) {
      out.append(s.substr(pos));
      return out;
    }
    out.append(s.substr(pos, hit - pos)).append(to);
    pos = hit + from.size();
  }
}

}  // namespace

struct Tokenizer::Impl {
  TokenizerSpec spec;
  TextMap ids;                       // token text -> first id with that text
  std::vector<std::string> pieces;   // [n_vocab] output bytes per token
  std::vector<uint8_t> eog;          // [n_vocab] 1 = ends generation
  std::array<int32_t, 256> byte_tok;  // token for one raw byte (ByteBpe: its alphabet char;
                                      // SpmBpe: "<0xXX>"); -1 if the vocabulary lacks it
  BpeMerges merges;
  SpecialTokenMatcher specials;
  mutable std::mutex cache_mu;
  mutable WordCache cache;

  explicit Impl(TokenizerSpec s);
  TokenType type(int32_t id) const { return spec.types[static_cast<size_t>(id)]; }
  int32_t find(std::string_view t) const {
    auto it = ids.find(t);
    return it == ids.end() ? -1 : it->second;
  }
  void build_merges_from_scores();
  void encode_text(std::string_view text, std::vector<int32_t>& out) const;
  void encode_word(std::string_view word, bool spm, std::vector<int32_t>& out) const;
  void bpe(std::string_view word, bool spm, std::vector<int32_t>& out) const;
};

Tokenizer::Impl::Impl(TokenizerSpec s) : spec(std::move(s)) {
  validate_tokenizer_spec(spec);
  const size_t n = spec.tokens.size();
  if (spec.types.empty()) spec.types.assign(n, TokenType::Normal);
  ids.reserve(n);
  pieces.resize(n);
  eog.assign(n, 0);
  const bool spm = spec.kind == TokenizerKind::SpmBpe;
  for (size_t i = 0; i < n; ++i) {
    const std::string& t = spec.tokens[i];
    const TokenType ty = spec.types[i];
    ids.try_emplace(t, static_cast<int32_t>(i));
    if (ty == TokenType::Control || ty == TokenType::Unknown || ty == TokenType::UserDefined) {
      pieces[i] = t;  // added/special tokens are stored as plain text in both families
      specials.add(t, static_cast<int32_t>(i), ty == TokenType::UserDefined);
    } else if (spm && ty == TokenType::Byte && parse_byte_token(t) >= 0) {
      pieces[i] = std::string(1, static_cast<char>(parse_byte_token(t)));
    } else {
      pieces[i] = spm ? replace_all(t, kSpmSpace, " ") : byte_level_decode(t);
    }
  }
  for (int32_t id : spec.eog_ids) eog[static_cast<size_t>(id)] = 1;
  for (int b = 0; b < 256; ++b) {
    const auto byte = static_cast<uint8_t>(b);
    byte_tok[byte] = spm ? find(fmt::format("<0x{:02X}>", b)) : find(byte_level_char(byte));
  }
  if (!spec.merges.empty()) {
    std::string joined;
    for (size_t r = 0; r < spec.merges.size(); ++r) {
      const auto& [a, b] = spec.merges[r];
      joined.assign(a).append(b);
      merges.add(find(a), find(b), static_cast<int32_t>(r), find(joined));  // validated above
    }
  } else {
    build_merges_from_scores();
  }
}

// SentencePiece BPE merges the adjacent pair whose concatenation is the highest-scoring token.
// That is a rank table: every split of a normal token into two known tokens is a merge, ranked by
// the token's score (equal scores share a rank, so the leftmost pair wins as in SentencePiece).
void Tokenizer::Impl::build_merges_from_scores() {
  const size_t n = spec.tokens.size();
  std::map<float, int32_t, std::greater<>> rank_of_score;
  for (float sc : spec.scores) rank_of_score.emplace(sc, 0);
  int32_t next_rank = 0;
  for (auto& [sc, rank] : rank_of_score) rank = next_rank++;
  for (size_t i = 0; i < n; ++i) {
    if (spec.types[i] != TokenType::Normal && spec.types[i] != TokenType::Undefined) continue;
    const std::string_view t = spec.tokens[i];
    if (find(t) != static_cast<int32_t>(i)) continue;  // a duplicate text: the first id wins
    const int32_t rank = rank_of_score.at(spec.scores[i]);
    for (size_t k = decode_utf8(t, 0).len; k < t.size(); k += decode_utf8(t, k).len) {
      const int32_t l = find(t.substr(0, k)), r = find(t.substr(k));
      if (l >= 0 && r >= 0) merges.add(l, r, rank, static_cast<int32_t>(i));
    }
  }
}

void Tokenizer::Impl::bpe(std::string_view word, bool spm, std::vector<int32_t>& out) const {
  thread_local std::vector<int32_t> sym;
  sym.clear();
  if (!spm) {
    // A byte with no token is left out before merging, so its neighbours can merge across the gap
    // (as the reference implementation does; SmolLM2 lacks e.g. 0x04 and 0xF2).
    for (char ch : word)
      if (const int32_t id = byte_tok[static_cast<uint8_t>(ch)]; id >= 0) sym.push_back(id);
  } else {
    // One symbol per character; a character with no token falls back to its byte tokens, or to
    // a single unknown symbol (-1) if any byte token is missing.
    for (size_t pos = 0; pos < word.size();) {
      const uint32_t len = decode_utf8(word, pos).len;
      const std::string_view ch = word.substr(pos, len);
      if (int32_t id = find(ch); id >= 0) {
        sym.push_back(id);
      } else {
        bool all = true;
        for (char b : ch) all = all && byte_tok[static_cast<uint8_t>(b)] >= 0;
        if (all)
          for (char b : ch) sym.push_back(byte_tok[static_cast<uint8_t>(b)]);
        else
          sym.push_back(-1);
      }
      pos += len;
    }
  }
  merges.apply(sym);
  for (int32_t id : sym) {
    if (id >= 0)
      out.push_back(id);
    else if (spec.unk_id >= 0)
      out.push_back(spec.unk_id);
  }
}

void Tokenizer::Impl::encode_word(std::string_view word, bool spm, std::vector<int32_t>& out) const {
  const bool cacheable = word.size() <= kMaxCachedWord;
  if (cacheable) {
    std::lock_guard lock(cache_mu);
    if (auto it = cache.find(word); it != cache.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const size_t start = out.size();
  int32_t whole = -1;
  if (spec.ignore_merges) {
    if (spm) {
      whole = find(word);
    } else {
      std::string mapped;
      for (char ch : word) mapped += byte_level_char(static_cast<uint8_t>(ch));
      whole = find(mapped);
    }
  }
  if (whole >= 0)
    out.push_back(whole);
  else
    bpe(word, spm, out);
  if (!cacheable) return;
  std::lock_guard lock(cache_mu);
  if (cache.size() >= kMaxCacheEntries) cache.clear();
  cache.try_emplace(std::string(word), out.begin() + static_cast<std::ptrdiff_t>(start), out.end());
}

// Text between special tokens. SentencePiece marks spaces with "▁" (and prefixes one to each such
// stretch when add_space_prefix, as the reference normalizer does) and treats it as one word.
void Tokenizer::Impl::encode_text(std::string_view text, std::vector<int32_t>& out) const {
  if (spec.kind == TokenizerKind::SpmBpe) {
    std::string norm(spec.add_space_prefix ? kSpmSpace : "");
    norm += replace_all(text, " ", kSpmSpace);
    encode_word(norm, true, out);
    return;
  }
  thread_local std::vector<std::string_view> words;
  words.clear();
  pre_tokenize(spec.pre, text, words);
  for (std::string_view w : words) encode_word(w, false, out);
}

Tokenizer::Tokenizer(TokenizerSpec spec) : impl_(std::make_unique<Impl>(std::move(spec))) {}
Tokenizer::~Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_bos,
                                       bool parse_special) const {
  const Impl& m = *impl_;
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 2);
  size_t seg = 0;  // start of the pending stretch of plain text
  for (size_t pos = 0; pos < text.size();) {
    if (m.specials.may_start(static_cast<unsigned char>(text[pos]))) {
      const auto hit = m.specials.match(text, pos, parse_special);
      if (hit.len > 0) {
        if (pos > seg) m.encode_text(text.substr(seg, pos - seg), out);
        out.push_back(hit.id);
        pos += hit.len;
        seg = pos;
        continue;
      }
    }
    ++pos;
  }
  if (text.size() > seg) m.encode_text(text.substr(seg), out);
  if (add_bos && m.spec.add_bos && (out.empty() || out.front() != m.spec.bos_id))
    out.insert(out.begin(), m.spec.bos_id);
  if (add_bos && m.spec.add_eos) out.push_back(m.spec.eos_id);
  return out;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  std::string out;
  for (int32_t id : ids) {
    if (skip_special && is_special(id)) continue;
    out += piece(id);
  }
  if (impl_->spec.kind == TokenizerKind::SpmBpe && impl_->spec.add_space_prefix &&
      !out.empty() && out[0] == ' ')
    out.erase(0, 1);
  return out;
}

const std::string& Tokenizer::piece(int32_t id) const {
  SSD_CHECK(id >= 0 && id < vocab_size(), "token id {} out of range (vocabulary of {} in {})", id,
            vocab_size(), impl_->spec.source);
  return impl_->pieces[static_cast<size_t>(id)];
}

const std::string& Tokenizer::token_text(int32_t id) const {
  piece(id);  // range check
  return impl_->spec.tokens[static_cast<size_t>(id)];
}

std::optional<int32_t> Tokenizer::find_token(std::string_view text) const {
  const int32_t id = impl_->find(text);
  return id >= 0 ? std::optional<int32_t>(id) : std::nullopt;
}

bool Tokenizer::is_eog(int32_t id) const {
  return id >= 0 && id < vocab_size() && impl_->eog[static_cast<size_t>(id)] != 0;
}

TokenType Tokenizer::token_type(int32_t id) const {
  piece(id);  // range check
  return impl_->type(id);
}

bool Tokenizer::is_special(int32_t id) const {
  const TokenType t = token_type(id);
  return t == TokenType::Control || t == TokenType::Unknown;
}

int32_t Tokenizer::vocab_size() const { return static_cast<int32_t>(impl_->spec.tokens.size()); }
int32_t Tokenizer::bos() const { return impl_->spec.bos_id; }
int32_t Tokenizer::eos() const { return impl_->spec.eos_id; }
int32_t Tokenizer::unk() const { return impl_->spec.unk_id; }
int32_t Tokenizer::pad() const { return impl_->spec.pad_id; }
const TokenizerSpec& Tokenizer::spec() const { return impl_->spec; }

}  // namespace ssd
