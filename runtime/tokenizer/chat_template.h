// Chat messages -> prompt text. Models ship a Jinja template (tokenizer.chat_template); rather
// than embed a Jinja interpreter we recognise the three prompt formats our models use by their
// marker strings and render them natively:
//   ChatML  "<|im_start|>{role}\n{content}<|im_end|>\n"       (SmolLM2, Qwen)
//   Llama3  "<|start_header_id|>{role}<|end_header_id|>\n\n{content}<|eot_id|>"
//   Llama2  "<s>[INST] <<SYS>>\n{system}\n<</SYS>>\n\n{user} [/INST] {assistant} </s>"
// A ChatML template that writes a fixed system message when the conversation has none (SmolLM2:
// "You are a helpful AI assistant named SmolLM, trained by Hugging Face") has that text extracted
// from the template and inserted the same way. The rendered text contains special-token text, so
// encode it with parse_special = true; a BOS written by the format is not doubled by encode.
#pragma once

#include <span>
#include <string>

#include "runtime/tokenizer/tokenizer_spec.h"

namespace ssd {

struct ChatMessage {
  std::string role;  // "system", "user", "assistant" (ChatML and Llama 3 accept any role name)
  std::string content;
};

enum class ChatFormat { ChatML, Llama3, Llama2 };

class ChatTemplate {
 public:
  // bos/eos: the token texts the format writes (Llama 3 and Llama 2 use them).
  explicit ChatTemplate(ChatFormat format, std::string default_system = {}, std::string bos = {},
                        std::string eos = {});

  // Detects the format from spec.chat_template's markers. An empty or unrecognised template falls
  // back to ChatML if the vocabulary has <|im_start|>; otherwise ssd::Error naming spec.source.
  static ChatTemplate from_spec(const TokenizerSpec& spec);

  // Prompt text for `messages`; add_generation_prompt appends the opening of an assistant turn
  // (Llama 2 prompts always end ready for the assistant). Llama 2 requires user/assistant turns
  // to alternate after an optional leading system message (ssd::Error otherwise).
  std::string render(std::span<const ChatMessage> messages, bool add_generation_prompt) const;

  ChatFormat format() const { return format_; }
  const std::string& default_system() const { return default_system_; }

 private:
  ChatFormat format_;
  std::string default_system_;  // ChatML: used when the first message is not "system"
  std::string bos_, eos_;
};

// The fixed system message a ChatML template writes when none is given (empty if none): the text
// of a string literal between "<|im_start|>system\n" and "<|im_end|>", Jinja escapes resolved.
std::string chatml_default_system(std::string_view template_text);

std::string_view chat_format_name(ChatFormat f);

}  // namespace ssd
