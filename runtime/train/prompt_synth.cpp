// Magpie-style prompt synthesis (see prompt_synth.h).
#include "runtime/train/prompt_synth.h"

#include <algorithm>
#include <cctype>
#include <unordered_set>

#include "runtime/core/error.h"
#include "runtime/generate/generation.h"
#include "runtime/train/prompt_set.h"

namespace ssd {

std::string user_turn_opening(const ChatTemplate& tmpl) {
  // A marker no template writes, so the text before it is exactly the turn's opening.
  static constexpr std::string_view kMarker = "\x01ssd-user-text\x01";
  const ChatMessage m{"user", std::string(kMarker)};
  const std::string text = tmpl.render({&m, 1}, /*add_generation_prompt=*/false);
  const size_t at = text.find(kMarker);
  SSD_CHECK(at != std::string::npos && at > 0,
            "the chat template does not place a user message where it can be cut ({} format)",
            chat_format_name(tmpl.format()));
  return text.substr(0, at);
}

std::string reject_reason(const std::string& text, bool ended, int32_t min_words,
                          std::string* cleaned) {
  if (!ended) return "truncated";
  size_t b = 0, e = text.size();
  while (b < e && std::isspace(static_cast<unsigned char>(text[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(text[e - 1]))) --e;
  const std::string t = text.substr(b, e - b);
  int32_t words = 0;
  bool in_word = false;
  for (char c : t) {
    const bool space = std::isspace(static_cast<unsigned char>(c)) != 0;
    if (!space && !in_word) ++words;
    in_word = !space;
  }
  if (words < min_words) return "too short";
  if (to_prompt_line(t).empty()) return "unwritable";
  if (cleaned != nullptr) *cleaned = t;
  return {};
}

std::vector<std::string> synthesize_prompts(
    TargetModel& target, const Tokenizer& tok, const std::vector<int32_t>& opening,
    const PromptSynthOptions& opts, PromptSynthStats* stats,
    const std::function<void(const PromptSynthStats&)>& progress) {
  SSD_CHECK(!opening.empty(), "synthesize_prompts: the turn opening has no tokens");
  SSD_CHECK(opts.count >= 1, "synthesize_prompts: count {} must be at least 1", opts.count);
  SSD_CHECK(opts.batch >= 1, "synthesize_prompts: batch {} must be at least 1", opts.batch);
  SSD_CHECK(opts.max_tokens >= 1, "synthesize_prompts: max_tokens {} must be at least 1",
            opts.max_tokens);
  SSD_CHECK(!opts.stop_ids.empty(),
            "synthesize_prompts: the model has no end-of-generation token to end a turn");
  validate(opts.sampler);
  SSD_CHECK(!is_greedy(opts.sampler),
            "synthesize_prompts: temperature 0 would write the same prompt every time");
  const int64_t max_attempts = opts.max_attempts > 0 ? opts.max_attempts : 4 * opts.count + 64;

  std::unordered_set<std::string> excluded, seen;
  for (const std::string& p : opts.exclude) excluded.insert(prompt_key(p));

  PromptSynthStats s;
  std::vector<std::string> kept;
  const double t0 = monotonic_seconds();
  while (s.kept < opts.count && s.attempts < max_attempts) {
    const int64_t n = std::min<int64_t>(opts.batch, max_attempts - s.attempts);
    std::vector<GenerationRequest> reqs(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      GenerationRequest& r = reqs[static_cast<size_t>(i)];
      r.prompt = opening;
      r.max_new_tokens = opts.max_tokens;
      r.sampler = opts.sampler;
      r.stream = static_cast<uint64_t>(s.attempts + i);
      r.stop_ids = opts.stop_ids;
    }
    const std::vector<GenerationResult> gen = generate_ar_batch(target, reqs);
    for (const GenerationResult& g : gen) {
      ++s.attempts;
      s.tokens += static_cast<int64_t>(g.tokens.size());
      std::vector<int32_t> ids = g.tokens;
      if (g.stopped_by_eog && !ids.empty()) ids.pop_back();  // the end token itself
      std::string text;
      const std::string raw = tok.decode(ids, /*skip_special=*/false);
      // A turn holding control tokens (a nested "<|im_start|>") would be re-read as markup.
      const std::string why = raw != tok.decode(ids, /*skip_special=*/true)
                                  ? "special token"
                                  : reject_reason(raw, g.stopped_by_eog, opts.min_words, &text);
      if (why == "truncated") {
        ++s.truncated;
      } else if (why == "too short") {
        ++s.too_short;
      } else if (!why.empty()) {
        ++s.unwritable;
      } else if (excluded.count(prompt_key(text)) != 0) {
        ++s.excluded;
      } else if (!seen.insert(prompt_key(text)).second) {
        ++s.duplicates;
      } else if (s.kept < opts.count) {
        kept.push_back(std::move(text));
        ++s.kept;
      } else {
        ++s.surplus;
      }
    }
    s.seconds = monotonic_seconds() - t0;
    if (progress) progress(s);
  }
  if (stats != nullptr) *stats = s;
  return kept;
}

}  // namespace ssd
