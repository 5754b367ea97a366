// Native renderers for the recognised chat formats (see chat_template.h). Each reproduces what the
// model's own Jinja template renders for plain {role, content} messages; tool calls and other
// template features are out of scope.
#include "runtime/tokenizer/chat_template.h"

#include <algorithm>

#include "runtime/core/error.h"

namespace ssd {
namespace {

// Jinja's trim / Python's str.strip() for the ASCII whitespace prompts contain.
std::string_view strip(std::string_view s) {
  constexpr std::string_view ws = " \t\n\r\v\f";
  const size_t b = s.find_first_not_of(ws);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

std::string render_chatml(std::span<const ChatMessage> msgs, bool gen, const std::string& sys) {
  std::string out;
  auto turn = [&](std::string_view role, std::string_view content) {
    out.append("<|im_start|>").append(role).append("\n").append(content).append("<|im_end|>\n");
  };
  // As the templates do: only inside the message loop, i.e. not for an empty conversation.
  if (!sys.empty() && !msgs.empty() && msgs.front().role != "system") turn("system", sys);
  for (const ChatMessage& m : msgs) turn(m.role, m.content);
  if (gen) out += "<|im_start|>assistant\n";
  return out;
}

std::string render_llama3(std::span<const ChatMessage> msgs, bool gen, const std::string& bos) {
  std::string out;
  if (!msgs.empty()) out += bos;
  auto header = [&](std::string_view role) {
    out.append("<|start_header_id|>").append(role).append("<|end_header_id|>\n\n");
  };
  for (const ChatMessage& m : msgs) {
    header(m.role);
    out.append(strip(m.content)).append("<|eot_id|>");
  }
  if (gen) header("assistant");
  return out;
}

std::string render_llama2(std::span<const ChatMessage> msgs, const std::string& bos,
                          const std::string& eos) {
  std::string system;
  if (!msgs.empty() && msgs.front().role == "system") {
    system = msgs.front().content;
    msgs = msgs.subspan(1);
  }
  std::string out;
  for (size_t i = 0; i < msgs.size(); ++i) {
    const ChatMessage& m = msgs[i];
    const std::string_view expected = i % 2 == 0 ? "user" : "assistant";
    SSD_CHECK(m.role == expected, "Llama 2 chat format: message {} has role '{}', expected '{}' "
              "(roles must alternate user/assistant after an optional system message)", i,
              m.role, expected);
    std::string content = m.content;
    if (i == 0 && !system.empty()) content = "<<SYS>>\n" + system + "\n<</SYS>>\n\n" + content;
    if (m.role == "user")
      out.append(bos).append("[INST] ").append(strip(content)).append(" [/INST]");
    else
      out.append(" ").append(strip(content)).append(" ").append(eos);
  }
  return out;
}

}  // namespace

ChatTemplate::ChatTemplate(ChatFormat format, std::string default_system, std::string bos,
                           std::string eos)
    : format_(format),
      default_system_(std::move(default_system)),
      bos_(std::move(bos)),
      eos_(std::move(eos)) {}

std::string chatml_default_system(std::string_view t) {
  constexpr std::string_view head = "<|im_start|>system";
  constexpr std::string_view tail = "<|im_end|>";
  for (size_t pos = t.find(head); pos != std::string_view::npos; pos = t.find(head, pos + 1)) {
    size_t p = pos + head.size();
    if (t.substr(p, 1) == "\n") {
      p += 1;
    } else if (t.substr(p, 2) == "\\n") {
      p += 2;
    } else {
      continue;
    }
    // Read on through one string literal; a closing quote or an expression before <|im_end|>
    // means the system text is computed (e.g. message['content']), not fixed.
    std::string text;
    bool literal = true;
    for (; p < t.size() && t.substr(p, tail.size()) != tail; ++p) {
      const char c = t[p];
      if (c == '\'' || c == '"' || c == '{' || c == '}') {
        literal = false;
        break;
      }
      if (c == '\\' && p + 1 < t.size()) {
        const char e = t[++p];
        text += e == 'n' ? '\n' : e == 't' ? '\t' : e;
      } else {
        text += c;
      }
    }
    if (literal && p < t.size() && !text.empty()) return text;
  }
  return {};
}

ChatTemplate ChatTemplate::from_spec(const TokenizerSpec& spec) {
  const std::string& t = spec.chat_template;
  auto text_of = [&](int32_t id) {
    return id >= 0 ? spec.tokens[static_cast<size_t>(id)] : std::string();
  };
  const std::string bos = text_of(spec.bos_id), eos = text_of(spec.eos_id);
  if (t.find("<|im_start|>") != std::string::npos)
    return ChatTemplate(ChatFormat::ChatML, chatml_default_system(t));
  if (t.find("<|start_header_id|>") != std::string::npos)
    return ChatTemplate(ChatFormat::Llama3, {}, bos, eos);
  if (t.find("[INST]") != std::string::npos) return ChatTemplate(ChatFormat::Llama2, {}, bos, eos);
  const bool has_im_start =
      std::find(spec.tokens.begin(), spec.tokens.end(), "<|im_start|>") != spec.tokens.end();
  SSD_CHECK(has_im_start, "{}: {} chat template and no <|im_start|> token to fall back to ChatML "
            "(recognised: ChatML, Llama 3, Llama 2)", spec.source,
            t.empty() ? "no" : "unrecognised");
  return ChatTemplate(ChatFormat::ChatML);
}

std::string ChatTemplate::render(std::span<const ChatMessage> messages,
                                 bool add_generation_prompt) const {
  switch (format_) {
    case ChatFormat::ChatML: return render_chatml(messages, add_generation_prompt, default_system_);
    case ChatFormat::Llama3: return render_llama3(messages, add_generation_prompt, bos_);
    case ChatFormat::Llama2: return render_llama2(messages, bos_, eos_);
  }
  return {};
}

std::string_view chat_format_name(ChatFormat f) {
  switch (f) {
    case ChatFormat::ChatML: return "chatml";
    case ChatFormat::Llama3: return "llama3";
    case ChatFormat::Llama2: return "llama2";
  }
  return "?";
}

}  // namespace ssd
