// Scanners for the pre-tokenizer regexes. The text is first decoded into an array of characters
// (offset, code point, class) so that lookahead and the regex engine's backtracking become index
// arithmetic. Each match_* function returns the end of the match starting at i, never i itself:
// every character is covered by some alternative, so the scan always advances.
#include "runtime/tokenizer/pre_tokenizer.h"

#include <algorithm>

#include "runtime/tokenizer/unicode_text.h"

namespace ssd {
namespace {

struct Char {
  uint32_t off;  // byte offset in the text
  uint32_t cp;   // code point (kInvalidCodePoint for a stray byte)
  CharClass cls;
};

// The decoded text: chars[i] for i < n, plus the byte offset where each range ends.
struct Chars {
  std::vector<Char> c;
  size_t bytes = 0;
  uint32_t off(size_t i) const { return i < c.size() ? c[i].off : static_cast<uint32_t>(bytes); }
};

void decode_chars(std::string_view text, Chars& out) {
  out.c.clear();
  out.c.reserve(text.size());
  out.bytes = text.size();
  for (size_t pos = 0; pos < text.size();) {
    const Utf8Char u = decode_utf8(text, pos);
    out.c.push_back({static_cast<uint32_t>(pos), u.cp, char_class(u.cp)});
    pos += u.len;
  }
}

size_t run_of(const std::vector<Char>& c, size_t i, size_t end, CharClass cls) {
  while (i < end && c[i].cls == cls) ++i;
  return i;
}

bool is_crlf(uint32_t cp) { return cp == '\r' || cp == '\n'; }

// `\s+(?!\S)|\s+` at a whitespace character: a run followed by a non-space gives up its last
// character (which then prefixes the next word); a run of one, or one at the end, is kept whole.
size_t match_space_run(const std::vector<Char>& c, size_t i, size_t end) {
  const size_t r = run_of(c, i, end, CharClass::Space);
  if (r == end || r - i == 1) return r;
  return r - 1;
}

// 's|'t|'re|'ve|'m|'ll|'d at an apostrophe; `fold` makes it case-insensitive as (?i:...) does
// under Unicode case folding, where U+017F (long s) folds to 's'. Returns i when none matches.
size_t match_contraction(const std::vector<Char>& c, size_t i, size_t end, bool fold) {
  if (c[i].cp != '\'' || i + 1 >= end) return i;
  auto low = [&](size_t k) -> uint32_t {
    uint32_t cp = c[k].cp;
    if (!fold) return cp;
    if (cp == 0x17F) return 's';
    return (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp;
  };
  const uint32_t a = low(i + 1);
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 2;
  if (i + 2 < end) {
    const uint32_t b = low(i + 2);
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return i + 3;
  }
  return i;
}

// GPT-2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
size_t match_gpt2(const std::vector<Char>& c, size_t i, size_t end) {
  if (size_t j = match_contraction(c, i, end, false); j != i) return j;
  size_t s = i;
  // An optional U+0020 joins the run that follows it unless that is more whitespace.
  if (c[s].cp == ' ' && s + 1 < end && c[s + 1].cls != CharClass::Space) ++s;
  const CharClass cls = c[s].cls;
  if (cls == CharClass::Space) return match_space_run(c, i, end);
  return run_of(c, s, end, cls);
}

// Llama 3 (max_digits 3) and Qwen2 (max_digits 1):
// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|
// \s*[\r\n]+|\s+(?!\S)|\s+
size_t match_llama3(const std::vector<Char>& c, size_t i, size_t end, size_t max_digits) {
  if (size_t j = match_contraction(c, i, end, true); j != i) return j;
  const CharClass cls = c[i].cls;
  // [^\r\n\p{L}\p{N}]?\p{L}+
  if (cls == CharClass::Letter) return run_of(c, i, end, CharClass::Letter);
  if (cls != CharClass::Number && !is_crlf(c[i].cp) && i + 1 < end &&
      c[i + 1].cls == CharClass::Letter)
    return run_of(c, i + 1, end, CharClass::Letter);
  // \p{N}{1,3}
  if (cls == CharClass::Number) return std::min(run_of(c, i, end, CharClass::Number), i + max_digits);
  // ' ?[^\s\p{L}\p{N}]+[\r\n]*'
  size_t s = i;
  if (c[s].cp == ' ' && s + 1 < end && c[s + 1].cls == CharClass::Other) ++s;
  if (c[s].cls == CharClass::Other) {
    size_t j = run_of(c, s, end, CharClass::Other);
    while (j < end && is_crlf(c[j].cp)) ++j;
    return j;
  }
  // \s*[\r\n]+ : the whitespace run up to and including its last line break.
  const size_t r = run_of(c, i, end, CharClass::Space);
  for (size_t k = r; k > i; --k)
    if (is_crlf(c[k - 1].cp)) return k;
  return match_space_run(c, i, end);
}

template <typename Match>
void split_range(const Chars& t, std::string_view text, size_t begin, size_t end, Match&& match,
                 std::vector<std::string_view>& out) {
  for (size_t i = begin; i < end;) {
    const size_t j = match(t.c, i, end);
    out.push_back(text.substr(t.off(i), t.off(j) - t.off(i)));
    i = j;
  }
}

}  // namespace

void pre_tokenize(PreTokenizerKind kind, std::string_view text,
                  std::vector<std::string_view>& out) {
  if (text.empty()) return;
  if (kind == PreTokenizerKind::None) {
    out.push_back(text);
    return;
  }
  thread_local Chars t;  // reused across calls: decoding is the hot allocation
  decode_chars(text, t);
  const size_t n = t.c.size();
  switch (kind) {
    case PreTokenizerKind::Gpt2:
      split_range(t, text, 0, n, match_gpt2, out);
      break;
    case PreTokenizerKind::Llama3:
    case PreTokenizerKind::Qwen2: {
      const size_t max_digits = kind == PreTokenizerKind::Llama3 ? 3 : 1;
      auto m = [max_digits](const std::vector<Char>& c, size_t i, size_t end) {
        return match_llama3(c, i, end, max_digits);
      };
      split_range(t, text, 0, n, m, out);
      break;
    }
    case PreTokenizerKind::SmolLM: {
      // Every number character is its own piece; the stretches between are split as GPT-2 would
      // split them on their own (so their ends are ends of text for the lookahead).
      size_t start = 0;
      for (size_t i = 0; i <= n; ++i) {
        if (i < n && t.c[i].cls != CharClass::Number) continue;
        split_range(t, text, start, i, match_gpt2, out);
        if (i < n) out.push_back(text.substr(t.off(i), t.off(i + 1) - t.off(i)));
        start = i + 1;
      }
      break;
    }
    case PreTokenizerKind::None:
      break;
  }
}

}  // namespace ssd
