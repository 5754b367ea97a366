// Prompt synthesis (Magpie-style): the target writes the user turns of its own training set.
// An instruction-tuned model given its chat template only up to the opening of a user turn
// ("<|im_start|>system\n...<|im_end|>\n<|im_start|>user\n" for ChatML) continues with a user
// request drawn from the distribution it was tuned on. Sampling many such turns (temperature,
// nucleus) gives a prompt set far more varied than templates written by hand, at the cost of a
// short decode each, and in the distribution a chat drafter meets at run time.
//
// Each attempt i is request stream i of one seeded sampler, so a (model, options) pair gives the
// same prompts bit for bit. Attempts are kept only when the turn ended by itself (an
// end-of-generation token within the budget), has at least `min_words` words, is new (by
// prompt_key, against the kept ones and `exclude`, e.g. a held-out split), holds no special
// token and can be written as one prompt-file line (to_prompt_line).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "runtime/model/target_model.h"
#include "runtime/sampling/sampler.h"
#include "runtime/tokenizer/chat_template.h"
#include "runtime/tokenizer/tokenizer.h"

namespace ssd {

struct PromptSynthOptions {
  int64_t count = 1000;          // prompts to keep
  int64_t max_attempts = 0;      // give up after this many turns; 0 = 4 x count + 64
  int32_t batch = 32;            // turns decoded together
  int64_t max_tokens = 96;       // budget of one user turn (a turn that reaches it is dropped)
  int32_t min_words = 3;
  SamplerConfig sampler{.temperature = 1.0f, .top_p = 0.95f};
  std::vector<int32_t> stop_ids; // end-of-generation tokens: the turn's end
  std::vector<std::string> exclude;  // prompts never to produce (compared by prompt_key)
};

struct PromptSynthStats {
  int64_t attempts = 0, kept = 0;
  int64_t truncated = 0, too_short = 0, duplicates = 0, excluded = 0;
  int64_t unwritable = 0;      // special tokens, or not writable as a prompt-file line
  int64_t surplus = 0;         // good turns of the last batch beyond `count`
  // attempts == kept + truncated + too_short + duplicates + excluded + unwritable + surplus
  int64_t tokens = 0;            // sampled tokens, all attempts
  double seconds = 0;
};

// The chat-template text that opens a user turn: the rendering of a one-message user
// conversation cut just before the message text (the default system message included).
std::string user_turn_opening(const ChatTemplate& tmpl);

// Why one sampled turn would be dropped ("" when it is kept as `cleaned`, its text trimmed of
// surrounding whitespace). Rules as at the top of this file, except duplicates.
std::string reject_reason(const std::string& text, bool ended, int32_t min_words,
                          std::string* cleaned);

// Samples user turns after `opening` (token ids, non-empty) until `count` are kept or the
// attempts run out; the kept prompts in attempt order. `progress` is called after each batch.
std::vector<std::string> synthesize_prompts(
    TargetModel& target, const Tokenizer& tok, const std::vector<int32_t>& opening,
    const PromptSynthOptions& opts, PromptSynthStats* stats = nullptr,
    const std::function<void(const PromptSynthStats&)>& progress = {});

}  // namespace ssd
