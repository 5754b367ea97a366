// tokenizer.ggml.* reading on small GGUF files written by the test GgufWriter: pre-tokenizer
// names, defaults per model family, and errors that name the file and key.
#include "runtime/tokenizer/gguf_tokenizer.h"

#include <gtest/gtest.h>

#include "runtime/core/error.h"
#include "runtime/tokenizer/byte_level.h"
#include "tests/support/gguf_writer.h"
#include "tests/support/temp_dir.h"

namespace ssd {
namespace {

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return {};
}

// A byte-level vocabulary: 256 byte tokens, "he", and the control tokens <|im_start|>, <|im_end|>.
test::GgufWriter byte_level_writer(const char* pre) {
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.push_back(byte_level_char(static_cast<uint8_t>(b)));
  tokens.insert(tokens.end(), {"he", "<|im_start|>", "<|im_end|>"});
  std::vector<int64_t> types(tokens.size(), 1);
  types[257] = types[258] = 3;
  test::GgufWriter w;
  w.add_string("tokenizer.ggml.model", "gpt2");
  if (pre) w.add_string("tokenizer.ggml.pre", pre);
  w.add_string_array("tokenizer.ggml.tokens", tokens)
      .add_int_array("tokenizer.ggml.token_type", types)
      .add_string_array("tokenizer.ggml.merges", {"h e"})
      .add_u32("tokenizer.ggml.eos_token_id", 258);
  return w;
}

TokenizerSpec load(const test::GgufWriter& w, const test::TempDir& tmp) {
  return tokenizer_spec_from_gguf(GgufFile::open(w.write(tmp.file("tok.gguf"))));
}

TEST(GgufSpec, PreTokenizerNames) {
  const std::string src = "m.gguf";
  EXPECT_EQ(pre_tokenizer_from_gguf_name("default", src), PreTokenizerKind::Gpt2);
  EXPECT_EQ(pre_tokenizer_from_gguf_name("gpt2", src), PreTokenizerKind::Gpt2);
  EXPECT_EQ(pre_tokenizer_from_gguf_name("llama-bpe", src), PreTokenizerKind::Llama3);
  EXPECT_EQ(pre_tokenizer_from_gguf_name("llama3", src), PreTokenizerKind::Llama3);
  EXPECT_EQ(pre_tokenizer_from_gguf_name("qwen2", src), PreTokenizerKind::Qwen2);
  EXPECT_EQ(pre_tokenizer_from_gguf_name("smollm", src), PreTokenizerKind::SmolLM);
  const auto msg = error_of([&] { pre_tokenizer_from_gguf_name("falcon", src); });
  EXPECT_NE(msg.find("m.gguf: unsupported tokenizer.ggml.pre 'falcon'"), std::string::npos) << msg;
}

TEST(GgufSpec, ByteLevelFileAndDefaults) {
  test::TempDir tmp;
  const TokenizerSpec s = load(byte_level_writer("llama-bpe"), tmp);
  EXPECT_EQ(s.kind, TokenizerKind::ByteBpe);
  EXPECT_EQ(s.pre, PreTokenizerKind::Llama3);
  EXPECT_TRUE(s.ignore_merges);  // Llama 3 vocabularies take whole-word tokens directly
  EXPECT_FALSE(s.add_bos);       // byte-level default when add_bos_token is absent
  EXPECT_EQ(s.bos_id, -1);
  EXPECT_EQ(s.eog_ids, (std::vector<int32_t>{258}));
  EXPECT_EQ(s.types[257], TokenType::Control);
  EXPECT_NE(s.source.find("tok.gguf"), std::string::npos);
  // A file from before the .pre key existed used the GPT-2 split.
  EXPECT_EQ(load(byte_level_writer(nullptr), tmp).pre, PreTokenizerKind::Gpt2);
}

TEST(GgufSpec, ErrorsNameFileAndKey) {
  test::TempDir tmp;
  auto msg = error_of([&] { load(byte_level_writer("falcon"), tmp); });
  EXPECT_NE(msg.find("tok.gguf: unsupported tokenizer.ggml.pre 'falcon'"), std::string::npos) << msg;

  test::GgufWriter no_model;
  no_model.add_string_array("tokenizer.ggml.tokens", {"a"});
  msg = error_of([&] { load(no_model, tmp); });
  EXPECT_NE(msg.find("missing metadata key 'tokenizer.ggml.model'"), std::string::npos) << msg;

  test::GgufWriter bert;
  bert.add_string("tokenizer.ggml.model", "bert").add_string_array("tokenizer.ggml.tokens", {"a"});
  msg = error_of([&] { load(bert, tmp); });
  EXPECT_NE(msg.find("unsupported tokenizer.ggml.model 'bert'"), std::string::npos) << msg;

  test::GgufWriter no_merges;
  no_merges.add_string("tokenizer.ggml.model", "gpt2").add_string_array("tokenizer.ggml.tokens", {"a"});
  msg = error_of([&] { load(no_merges, tmp); });
  EXPECT_NE(msg.find("'tokenizer.ggml.merges'"), std::string::npos) << msg;

  auto bad_id = byte_level_writer("gpt2");
  bad_id.add_u32("tokenizer.ggml.bos_token_id", 5000);
  msg = error_of([&] { load(bad_id, tmp); });
  EXPECT_NE(msg.find("tokenizer.ggml.bos_token_id = 5000 is out of range"), std::string::npos) << msg;

  test::GgufWriter spm_no_scores;
  spm_no_scores.add_string("tokenizer.ggml.model", "llama")
      .add_string_array("tokenizer.ggml.tokens", {"a", "b"});
  msg = error_of([&] { load(spm_no_scores, tmp); });
  EXPECT_NE(msg.find("'tokenizer.ggml.scores'"), std::string::npos) << msg;

  test::GgufWriter short_scores;
  short_scores.add_string("tokenizer.ggml.model", "llama")
      .add_string_array("tokenizer.ggml.tokens", {"a", "b"})
      .add_float_array("tokenizer.ggml.scores", {0.0});
  msg = error_of([&] { load(short_scores, tmp); });
  EXPECT_NE(msg.find("tokenizer.ggml.scores has 1 entries for 2 tokens"), std::string::npos) << msg;
}

TEST(GgufSpec, MergeErrorsNameTheMerge) {
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.push_back(byte_level_char(static_cast<uint8_t>(b)));
  test::TempDir tmp;
  for (const auto& [merge, expect] : std::vector<std::pair<std::string, std::string>>{
           {"he", "tokenizer.ggml.merges[0] = 'he' is not 'left right'"},
           {"h zz", "merge 0 ('h zz') refers to unknown token 'zz'"},
           {"h e", "merge 0 ('h e') produces unknown token 'he'"}}) {
    test::GgufWriter w;
    w.add_string("tokenizer.ggml.model", "gpt2")
        .add_string_array("tokenizer.ggml.tokens", tokens)
        .add_string_array("tokenizer.ggml.merges", {merge});
    const auto msg = error_of([&] { load(w, tmp); });
    EXPECT_NE(msg.find(expect), std::string::npos) << msg;
    EXPECT_NE(msg.find("tok.gguf"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace ssd
