// Chat prompt rendering. Expected prompts are what the models' own Jinja templates render for the
// same messages (checked with jinja2 3.1.6 against the SmolLM2 template from its GGUF and the
// published Llama 3 and Llama 2 chat templates); the templates here are short stand-ins that
// carry the markers detection looks for.
#include "runtime/tokenizer/chat_template.h"

#include <gtest/gtest.h>

#include "runtime/core/error.h"

namespace ssd {
namespace {

const std::vector<ChatMessage> kUserOnly = {{"user", "Hi there"}};
const std::vector<ChatMessage> kSysUser = {{"system", "Be brief."}, {"user", " What is 2+2? "}};
const std::vector<ChatMessage> kMulti = {
    {"system", "S"}, {"user", "A"}, {"assistant", " B "}, {"user", "C"}};

TokenizerSpec spec_with(std::string tmpl, std::vector<std::string> tokens = {"<s>", "</s>"}) {
  TokenizerSpec s;
  s.source = "model.gguf";
  s.tokens = std::move(tokens);
  s.bos_id = 0;
  s.eos_id = 1;
  s.chat_template = std::move(tmpl);
  return s;
}

TEST(ChatTemplate, ChatMLWithDefaultSystemPrompt) {
  // Same shape as SmolLM2's template (system text written into a string literal).
  const std::string tmpl =
      "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
      "{{ '<|im_start|>system\nYou are Tiny, a test model<|im_end|>\n' }}{% endif %}"
      "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
      "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";
  const ChatTemplate ct = ChatTemplate::from_spec(spec_with(tmpl));
  ASSERT_EQ(ct.format(), ChatFormat::ChatML);
  EXPECT_EQ(ct.default_system(), "You are Tiny, a test model");
  EXPECT_EQ(ct.render(kUserOnly, true),
            "<|im_start|>system\nYou are Tiny, a test model<|im_end|>\n"
            "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(ct.render(kSysUser, false),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n What is 2+2? <|im_end|>\n");
  EXPECT_EQ(ct.render(kMulti, true),
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nA<|im_end|>\n"
            "<|im_start|>assistant\n B <|im_end|>\n<|im_start|>user\nC<|im_end|>\n"
            "<|im_start|>assistant\n");
  EXPECT_EQ(ct.render({}, true), "<|im_start|>assistant\n");  // the loop never runs
}

TEST(ChatTemplate, DefaultSystemExtraction) {
  // Escaped newline and an escaped quote inside the literal.
  EXPECT_EQ(chatml_default_system(R"({{ '<|im_start|>system\nYou\'re Q.<|im_end|>\n' }})"),
            "You're Q.");
  // The system text comes from the messages: not a default.
  EXPECT_EQ(chatml_default_system(
                "{{ '<|im_start|>system\n' + messages[0]['content'] + '<|im_end|>\n' }}"),
            "");
  EXPECT_EQ(chatml_default_system("{{ '<|im_start|>' + role }}"), "");
}

TEST(ChatTemplate, Llama3) {
  const ChatTemplate ct = ChatTemplate::from_spec(spec_with(
      "{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>' }}",
      {"<|begin_of_text|>", "<|eot_id|>"}));
  ASSERT_EQ(ct.format(), ChatFormat::Llama3);
  EXPECT_EQ(ct.render(kUserOnly, false),
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi there<|eot_id|>");
  // Contents are trimmed.
  EXPECT_EQ(ct.render(kSysUser, true),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nWhat is 2+2?<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_EQ(ct.render({}, true), "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ChatTemplate, Llama2) {
  const ChatTemplate ct = ChatTemplate::from_spec(spec_with("{{ bos_token + '[INST] ' }}"));
  ASSERT_EQ(ct.format(), ChatFormat::Llama2);
  EXPECT_EQ(ct.render(kUserOnly, true), "<s>[INST] Hi there [/INST]");
  // The system block joins the first user message before stripping, so the user's leading
  // space survives after "\n\n" while the trailing one goes.
  EXPECT_EQ(ct.render(kSysUser, true),
            "<s>[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\n What is 2+2? [/INST]");
  EXPECT_EQ(ct.render(kMulti, false),
            "<s>[INST] <<SYS>>\nS\n<</SYS>>\n\nA [/INST] B </s><s>[INST] C [/INST]");
  const std::vector<ChatMessage> bad = {{"user", "a"}, {"user", "b"}};
  EXPECT_THROW(ct.render(bad, true), Error);
}

TEST(ChatTemplate, FallbackAndRejection) {
  // No template, or one we do not recognise: ChatML if the vocabulary has <|im_start|> ...
  EXPECT_EQ(ChatTemplate::from_spec(spec_with("", {"a", "<|im_start|>"})).format(),
            ChatFormat::ChatML);
  EXPECT_EQ(ChatTemplate::from_spec(spec_with("{{ weird }}", {"a", "<|im_start|>"})).format(),
            ChatFormat::ChatML);
  // ... otherwise an error naming the model file.
  try {
    ChatTemplate::from_spec(spec_with("{{ weird }}"));
    FAIL() << "expected ssd::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.gguf: unrecognised chat template"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace ssd
