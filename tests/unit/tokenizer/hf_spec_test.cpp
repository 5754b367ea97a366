// tokenizer.json / tokenizer_config.json reading: which pipelines are recognised, what the
// config overrides, and that every rejection names the file and the field.
#include "runtime/tokenizer/hf_tokenizer.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "runtime/core/error.h"
#include "runtime/tokenizer/byte_level.h"
#include "runtime/tokenizer/tokenizer.h"

namespace ssd {
namespace {

using nlohmann::json;

constexpr const char* kLlama3Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kQwen2Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

json byte_level(bool use_regex) {
  return {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", use_regex}};
}

json split_then_byte_level(const std::string& regex) {
  return {{"type", "Sequence"},
          {"pretokenizers",
           {{{"type", "Split"},
             {"pattern", {{"Regex", regex}}},
             {"behavior", "Isolated"},
             {"invert", false}},
            byte_level(false)}}};
}

// A byte-level tokenizer.json: 256 byte tokens, "he" and "hel"+... merges, two added tokens.
json byte_level_json(json pre) {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_level_char(static_cast<uint8_t>(b))] = b;
  vocab["he"] = 256;
  vocab["ll"] = 257;
  vocab["hell"] = 258;
  return {{"added_tokens",
           {{{"id", 259}, {"content", "<|im_start|>"}, {"special", true}},
            {{"id", 260}, {"content", "<|im_end|>"}, {"special", true}},
            {{"id", 261}, {"content", "<extra>"}, {"special", false}}}},
          {"normalizer", nullptr},
          {"pre_tokenizer", std::move(pre)},
          {"decoder", {{"type", "ByteLevel"}}},
          {"model",
           {{"type", "BPE"},
            {"vocab", vocab},
            {"merges", {"h e", "l l", json::array({"he", "ll"})}}}}};
}

TokenizerSpec load(const json& j, const json& config = nullptr) {
  return tokenizer_spec_from_hf_json(j.dump(), config.is_null() ? "" : config.dump(),
                                     "dir/tokenizer.json", "dir/tokenizer_config.json");
}

// The message of the ssd::Error thrown by f (empty if none).
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return {};
}

TEST(HfSpec, RecognisesTheByteLevelPipelines) {
  EXPECT_EQ(load(byte_level_json(byte_level(true))).pre, PreTokenizerKind::Gpt2);
  EXPECT_EQ(load(byte_level_json(split_then_byte_level(kLlama3Regex))).pre,
            PreTokenizerKind::Llama3);
  EXPECT_EQ(load(byte_level_json(split_then_byte_level(kQwen2Regex))).pre, PreTokenizerKind::Qwen2);
  const json smollm = {{"type", "Sequence"},
                       {"pretokenizers",
                        {{{"type", "Digits"}, {"individual_digits", true}}, byte_level(true)}}};
  const TokenizerSpec s = load(byte_level_json(smollm));
  EXPECT_EQ(s.pre, PreTokenizerKind::SmolLM);
  EXPECT_EQ(s.kind, TokenizerKind::ByteBpe);
  EXPECT_EQ(s.tokens.size(), 262u);
  EXPECT_EQ(s.merges.size(), 3u);  // "a b" strings and ["a", "b"] pairs both accepted
  EXPECT_EQ(s.merges[2], (std::pair<std::string, std::string>{"he", "ll"}));
  EXPECT_EQ(s.types[259], TokenType::Control);
  EXPECT_EQ(s.types[261], TokenType::UserDefined);
  EXPECT_EQ(s.eog_ids, (std::vector<int32_t>{260}));  // <|im_end|> by name; no eos known
  EXPECT_FALSE(s.add_bos);
  const Tokenizer t(s);
  EXPECT_EQ(t.encode("<|im_start|>hello", false, true), (std::vector<int32_t>{259, 258, 'o'}));
}

TEST(HfSpec, UnknownPipelinesAreErrorsNotGuesses) {
  auto msg = error_of([] { load(byte_level_json(split_then_byte_level(R"(\p{L}+|\s+)"))); });
  EXPECT_NE(msg.find("dir/tokenizer.json"), std::string::npos) << msg;
  EXPECT_NE(msg.find("unsupported pre_tokenizer"), std::string::npos) << msg;

  json prefix = byte_level(true);
  prefix["add_prefix_space"] = true;
  msg = error_of([&] { load(byte_level_json(prefix)); });
  EXPECT_NE(msg.find("add_prefix_space"), std::string::npos) << msg;

  json nfc = byte_level_json(byte_level(true));
  nfc["normalizer"] = {{"type", "NFC"}};
  msg = error_of([&] { load(nfc); });
  EXPECT_NE(msg.find("unsupported normalizer"), std::string::npos) << msg;

  json wordpiece = byte_level_json(byte_level(true));
  wordpiece["model"]["type"] = "WordPiece";
  msg = error_of([&] { load(wordpiece); });
  EXPECT_NE(msg.find("model.type 'WordPiece'"), std::string::npos) << msg;
}

TEST(HfSpec, MissingAndBrokenFieldsAreNamed) {
  json j = byte_level_json(byte_level(true));
  j.erase("model");
  auto msg = error_of([&] { load(j); });
  EXPECT_NE(msg.find("dir/tokenizer.json: missing field 'model'"), std::string::npos) << msg;

  j = byte_level_json(byte_level(true));
  j["model"].erase("merges");
  msg = error_of([&] { load(j); });
  EXPECT_NE(msg.find("missing field 'model.merges'"), std::string::npos) << msg;

  j = byte_level_json(byte_level(true));
  j["model"]["merges"].push_back("h zz");
  msg = error_of([&] { load(j); });
  EXPECT_NE(msg.find("merge 3 ('h zz') refers to unknown token 'zz'"), std::string::npos) << msg;

  j = byte_level_json(byte_level(true));
  j["model"]["vocab"].erase("ll");  // id 257 now unused
  msg = error_of([&] { load(j); });
  EXPECT_NE(msg.find("no token has id 257"), std::string::npos) << msg;

  j = byte_level_json(byte_level(true));
  j["added_tokens"][0]["id"] = 256;  // collides with "he"
  msg = error_of([&] { load(j); });
  EXPECT_NE(msg.find("id 256 is both"), std::string::npos) << msg;

  msg = error_of([] { tokenizer_spec_from_hf_json("{not json", "", "x.json", ""); });
  EXPECT_NE(msg.find("x.json: invalid JSON"), std::string::npos) << msg;
}

TEST(HfSpec, ConfigSetsSpecialsBosAndTemplate) {
  const json config = {{"bos_token", {{"content", "<|im_start|>"}, {"special", true}}},
                       {"eos_token", "<|im_end|>"},
                       {"pad_token", nullptr},
                       {"add_bos_token", true},
                       {"chat_template", "{{ '<|im_start|>' }}"}};
  const TokenizerSpec s = load(byte_level_json(byte_level(true)), config);
  EXPECT_EQ(s.bos_id, 259);
  EXPECT_EQ(s.eos_id, 260);
  EXPECT_EQ(s.pad_id, -1);
  EXPECT_TRUE(s.add_bos);
  EXPECT_EQ(s.chat_template, "{{ '<|im_start|>' }}");

  const json listed = {{"chat_template",
                        {{{"name", "tool_use"}, {"template", "A"}},
                         {{"name", "default"}, {"template", "B"}}}}};
  EXPECT_EQ(load(byte_level_json(byte_level(true)), listed).chat_template, "B");

  const auto msg = error_of([] {
    load(byte_level_json(byte_level(true)), json{{"eos_token", "</s>"}});
  });
  EXPECT_NE(msg.find("dir/tokenizer_config.json: eos_token '</s>' is not in the vocabulary"),
            std::string::npos)
      << msg;
}

TEST(HfSpec, SentencePieceMetaspaceForm) {
  const std::string sp = "\xE2\x96\x81";
  json vocab = {{"<unk>", 0}, {"<s>", 1}, {"</s>", 2}, {sp, 3}, {"a", 4}, {sp + "a", 5}};
  for (int b = 0; b < 256; ++b) vocab[fmt::format("<0x{:02X}>", b)] = 6 + b;
  json j = {{"added_tokens",
             {{{"id", 0}, {"content", "<unk>"}, {"special", true}},
              {{"id", 1}, {"content", "<s>"}, {"special", true}},
              {{"id", 2}, {"content", "</s>"}, {"special", true}}}},
            {"normalizer", nullptr},
            {"pre_tokenizer",
             {{"type", "Metaspace"}, {"replacement", sp}, {"prepend_scheme", "first"},
              {"split", false}}},
            {"model",
             {{"type", "BPE"}, {"unk_token", "<unk>"}, {"byte_fallback", true}, {"vocab", vocab},
              {"merges", {sp + " a"}}}}};
  const TokenizerSpec s = load(j, json{{"bos_token", "<s>"}, {"eos_token", "</s>"},
                                       {"add_bos_token", true}});
  EXPECT_EQ(s.kind, TokenizerKind::SpmBpe);
  EXPECT_TRUE(s.add_space_prefix);
  EXPECT_EQ(s.types[6 + 'b'], TokenType::Byte);
  const Tokenizer t(s);
  EXPECT_EQ(t.encode("a b", true, false), (std::vector<int32_t>{1, 5, 3, 6 + 'b'}));

  j["pre_tokenizer"]["split"] = true;
  const auto msg = error_of([&] { load(j); });
  EXPECT_NE(msg.find("split = true"), std::string::npos) << msg;
}

}  // namespace
}  // namespace ssd
