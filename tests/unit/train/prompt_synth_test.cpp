// Prompt synthesis (runtime/train/prompt_synth.h) and the prompt-file helpers it writes with
// (runtime/train/prompt_set.h):
//   - the user-turn opening is the chat rendering cut before the message, for each format;
//   - the keep/drop rules, and to_prompt_line round-tripping through parse_prompt_lines;
//   - on the tiny model (random weights, so turns are random bytes): the same seed gives the
//     same prompts, another seed others; every kept prompt obeys the rules, is unique and is
//     not excluded; the counters add up to the attempts; bad options are refused.
#include <gtest/gtest.h>

#include <set>

#include "runtime/backend/backend.h"
#include "runtime/core/error.h"
#include "runtime/generate/generation.h"
#include "runtime/model/model_file.h"
#include "runtime/model/transformer.h"
#include "runtime/tokenizer/gguf_tokenizer.h"
#include "runtime/train/prompt_set.h"
#include "runtime/train/prompt_synth.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tiny_model.h"

namespace ssd {
namespace {

TEST(PromptSynth, UserTurnOpeningIsTheRenderingCutBeforeTheMessage) {
  const ChatTemplate chatml(ChatFormat::ChatML, "You are kind.");
  EXPECT_EQ(user_turn_opening(chatml),
            "<|im_start|>system\nYou are kind.<|im_end|>\n<|im_start|>user\n");
  EXPECT_EQ(user_turn_opening(ChatTemplate(ChatFormat::ChatML)), "<|im_start|>user\n");
  const ChatTemplate llama3(ChatFormat::Llama3, "", "<|begin_of_text|>", "<|eot_id|>");
  EXPECT_EQ(user_turn_opening(llama3),
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\n");
}

TEST(PromptSynth, KeepsOnlyEndedWordyWritableTurns) {
  std::string t;
  EXPECT_EQ(reject_reason("How do I bake bread?", false, 3, &t), "truncated");
  EXPECT_EQ(reject_reason("  Hi there ", true, 3, &t), "too short");
  EXPECT_EQ(reject_reason("#tag is a comment line", true, 3, &t), "unwritable");
  EXPECT_EQ(reject_reason("print a \\n in C please", true, 3, &t), "unwritable");
  EXPECT_EQ(reject_reason("\n  How do I bake bread?\nStep by step.  \n", true, 3, &t), "");
  EXPECT_EQ(t, "How do I bake bread?\nStep by step.");  // trimmed, inner newline kept
}

TEST(PromptSynth, PromptLinesRoundTripAndKeysIgnoreCaseAndSpacing) {
  for (const std::string p : {"one line", "two\nlines", "ends with a backslash\\",
                              "a\\ b \\t c", "tab\there"}) {
    const std::string line = to_prompt_line(p);
    ASSERT_FALSE(line.empty()) << p;
    EXPECT_EQ(line.find('\n'), std::string::npos);
    EXPECT_EQ(parse_prompt_lines(line + "\n"), std::vector<std::string>{p});
  }
  for (const std::string p : {"", "   \n ", "# heading", "a literal \\n", "cr\r"})
    EXPECT_EQ(to_prompt_line(p), "") << p;
  EXPECT_EQ(prompt_key("  What IS\n\tX?  "), "what is x?");
  EXPECT_EQ(prompt_key("What is X?"), prompt_key("what  is x?"));
  EXPECT_NE(prompt_key("What is X?"), prompt_key("What is Y?"));
}

struct TinyChat {
  test::TempDir tmp;
  ModelFile file;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Transformer> model;
  std::unique_ptr<KvCache> kv;
  std::unique_ptr<LocalTarget> target;
  Tokenizer tok;
  std::vector<int32_t> opening;
  TinyChat()
      : file(ModelFile::open(test::write_tiny_gguf(test::tiny_spec(Arch::Llama, DType::F32),
                                                   tmp.file("m.gguf")))),
        backend(make_cpu_backend(1)),
        tok(tokenizer_spec_from_gguf(*file.gguf())) {
    model = std::make_unique<Transformer>(file, *backend);
    kv = std::make_unique<KvCache>(model->kv_config(4096));
    target = std::make_unique<LocalTarget>(*model, *kv);
    opening = tok.encode(user_turn_opening(ChatTemplate::from_spec(tok.spec())), true, true);
  }
  PromptSynthOptions options() const {
    PromptSynthOptions o;
    o.count = 6;
    o.max_attempts = 400;
    o.batch = 16;
    o.max_tokens = 200;  // random turns end (the tiny EOS) by about 1 in 2 within the budget
    o.min_words = 2;
    o.sampler.seed = 7;
    o.stop_ids = tok.spec().eog_ids;
    return o;
  }
};

TEST(PromptSynth, SameSeedSameFileAndEveryKeptPromptObeysTheRules) {
  TinyChat t;
  ASSERT_FALSE(t.opening.empty());
  PromptSynthStats s1, s2, s3;
  const PromptSynthOptions o = t.options();
  const auto a = synthesize_prompts(*t.target, t.tok, t.opening, o, &s1);
  const auto b = synthesize_prompts(*t.target, t.tok, t.opening, o, &s2);
  EXPECT_EQ(a, b);
  ASSERT_EQ(static_cast<int64_t>(a.size()), o.count) << "attempts " << s1.attempts;
  EXPECT_EQ(s1.attempts, s1.kept + s1.truncated + s1.too_short + s1.duplicates + s1.excluded +
                             s1.unwritable + s1.surplus);
  EXPECT_GT(s1.truncated + s1.too_short + s1.unwritable, 0) << "no rule was ever exercised";
  std::set<std::string> keys;
  for (const std::string& p : a) {
    EXPECT_EQ(reject_reason(p, true, o.min_words, nullptr), "") << p;
    EXPECT_TRUE(keys.insert(prompt_key(p)).second) << "duplicate: " << p;
  }

  // Another seed: other prompts. Excluding the first run's prompts: none of them comes back.
  PromptSynthOptions o2 = o;
  o2.sampler.seed = 8;
  o2.exclude = a;
  const auto c = synthesize_prompts(*t.target, t.tok, t.opening, o2, &s3);
  ASSERT_FALSE(c.empty());
  for (const std::string& p : c) EXPECT_EQ(keys.count(prompt_key(p)), 0u) << p;
  EXPECT_NE(a, c);
}

TEST(PromptSynth, RefusesGreedyAndMissingEndTokens) {
  TinyChat t;
  PromptSynthOptions o = t.options();
  o.sampler.temperature = 0;
  EXPECT_THROW(synthesize_prompts(*t.target, t.tok, t.opening, o), Error);
  o = t.options();
  o.stop_ids.clear();
  EXPECT_THROW(synthesize_prompts(*t.target, t.tok, t.opening, o), Error);
  o = t.options();
  EXPECT_THROW(synthesize_prompts(*t.target, t.tok, {}, o), Error);
}

}  // namespace
}  // namespace ssd
