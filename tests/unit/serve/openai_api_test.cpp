// The OpenAI request parser and response formatter on their own: every accepted shape of the
// parameters, each wrong type or range named by its field, and the response objects' fields.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "actors/serve/openai_api.h"

namespace ssd {
namespace {

using json = nlohmann::json;

ApiError error_of(const std::string& body, bool chat = false) {
  try {
    parse_api_request(body, chat);
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "accepted: " << body;
  return {};
}

TEST(OpenAiApi, ParsesEveryParameter) {
  const ApiRequest r = parse_api_request(R"({"model": "m", "prompt": "hi", "max_tokens": 5,
      "temperature": 0.5, "top_p": 0.9, "top_k": 40, "min_p": 0.05, "seed": 7, "stop": ["a", "b"],
      "stop_token_ids": [3], "n": 1, "stream": true, "stream_options": {"include_usage": true},
      "ignore_eos": true, "return_token_ids": true})",
                                         false);
  EXPECT_EQ(r.model, "m");
  EXPECT_EQ(r.prompt_text, "hi");
  EXPECT_EQ(r.max_tokens, 5);
  EXPECT_DOUBLE_EQ(r.temperature, 0.5);
  EXPECT_DOUBLE_EQ(r.top_p, 0.9);
  EXPECT_EQ(r.top_k, 40);
  EXPECT_DOUBLE_EQ(r.min_p, 0.05);
  EXPECT_EQ(r.seed, 7u);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(r.stop_token_ids, std::vector<int32_t>{3});
  EXPECT_TRUE(r.stream && r.include_usage && r.ignore_eos && r.return_token_ids);
}

TEST(OpenAiApi, DefaultsAndAlternativeShapes) {
  const ApiRequest d = parse_api_request(R"({"prompt": ["one"]})", false);
  EXPECT_EQ(d.prompt_text, "one");
  EXPECT_FALSE(d.max_tokens.has_value());
  EXPECT_DOUBLE_EQ(d.temperature, 1.0);  // OpenAI's default
  EXPECT_EQ(d.top_k, 0);
  EXPECT_EQ(parse_api_request(R"({"prompt": [5, 6]})", false).prompt_ids,
            (std::vector<int32_t>{5, 6}));
  EXPECT_EQ(parse_api_request(R"({"prompt": "x", "top_k": -1})", false).top_k, 0);
  EXPECT_EQ(parse_api_request(R"({"prompt": "x", "stop": "END"})", false).stop,
            std::vector<std::string>{"END"});
  EXPECT_EQ(parse_api_request(R"({"prompt": "x", "max_completion_tokens": 3})", false).max_tokens,
            3);
  const ApiRequest c = parse_api_request(
      R"({"messages": [{"role": "developer", "content": "s"},
                       {"role": "user", "content": [{"type": "text", "text": "a"},
                                                    {"type": "text", "text": "b"}]}]})",
      true);
  ASSERT_EQ(c.messages.size(), 2u);
  EXPECT_EQ(c.messages[0].role, "system");
  EXPECT_EQ(c.messages[1].content, "ab");
}

TEST(OpenAiApi, EachBadInputNamesItsField) {
  EXPECT_EQ(error_of("{nope").code, "invalid_json");
  EXPECT_EQ(error_of("[1]").status, 400);
  EXPECT_EQ(error_of(R"({"prompt": "x", "max_tokens": 0})").param, "max_tokens");
  EXPECT_EQ(error_of(R"({"prompt": "x", "max_tokens": "3"})").param, "max_tokens");
  EXPECT_EQ(error_of(R"({"prompt": "x", "max_tokens": 2.5})").param, "max_tokens");
  EXPECT_EQ(error_of(R"({"prompt": "x", "temperature": -1})").param, "temperature");
  EXPECT_EQ(error_of(R"({"prompt": "x", "temperature": "hot"})").param, "temperature");
  EXPECT_EQ(error_of(R"({"prompt": "x", "top_p": 0})").param, "top_p");
  EXPECT_EQ(error_of(R"({"prompt": "x", "top_k": -2})").param, "top_k");
  EXPECT_EQ(error_of(R"({"prompt": "x", "min_p": 2})").param, "min_p");
  EXPECT_EQ(error_of(R"({"prompt": "x", "seed": "s"})").param, "seed");
  EXPECT_EQ(error_of(R"({"prompt": "x", "n": 3})").param, "n");
  EXPECT_EQ(error_of(R"({"prompt": "x", "stop": 4})").param, "stop");
  EXPECT_EQ(error_of(R"({"prompt": "x", "stop": ["a","b","c","d","e"]})").param, "stop");
  EXPECT_EQ(error_of(R"({"prompt": "x", "stop": [""]})").param, "stop");
  EXPECT_EQ(error_of(R"({"prompt": "x", "stop_token_ids": [-1]})").param, "stop_token_ids");
  EXPECT_EQ(error_of(R"({"prompt": "x", "stream": 1})").param, "stream");
  EXPECT_EQ(error_of(R"({"prompt": ["a", "b"]})").param, "prompt");
  EXPECT_EQ(error_of(R"({"max_tokens": 3})").param, "prompt");
  EXPECT_EQ(error_of(R"({"prompt": "x", "model": 3})").param, "model");
  EXPECT_EQ(error_of(R"({"messages": []})", true).param, "messages");
  EXPECT_EQ(error_of(R"({"messages": [{"role": "robot", "content": "x"}]})", true).param,
            "messages[0].role");
  EXPECT_EQ(error_of(R"({"messages": [{"role": "user", "content": 5}]})", true).param,
            "messages[0].content");
  EXPECT_EQ(error_of(R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})",
                     true).param,
            "messages[0].content");
}

TEST(OpenAiApi, ErrorBodyHasTheFourFields) {
  const json e = json::parse(error_body({413, "too big", "invalid_request_error", "", "x"}));
  EXPECT_EQ(e["error"]["message"], "too big");
  EXPECT_EQ(e["error"]["type"], "invalid_request_error");
  EXPECT_TRUE(e["error"]["param"].is_null());
  EXPECT_EQ(e["error"]["code"], "x");
}

TEST(OpenAiApi, ResponsesAndChunks) {
  ApiRequest chat;
  chat.chat = true;
  const ResponseId id{"chatcmpl-1", 100, "m"};
  const json whole = json::parse(completion_body(chat, id, "hi", "stop", {3, 2}, {7, 8}));
  EXPECT_EQ(whole["object"], "chat.completion");
  EXPECT_EQ(whole["choices"][0]["message"]["content"], "hi");
  EXPECT_EQ(whole["usage"]["total_tokens"], 5);
  EXPECT_FALSE(whole["choices"][0].contains("token_ids"));
  const std::string first = stream_chunk(chat, id, "", {}, true, "");
  ASSERT_TRUE(first.starts_with("data: ") && first.ends_with("\n\n"));
  const json c = json::parse(first.substr(6));
  EXPECT_EQ(c["object"], "chat.completion.chunk");
  EXPECT_EQ(c["choices"][0]["delta"]["role"], "assistant");
  EXPECT_TRUE(c["choices"][0]["finish_reason"].is_null());
  const json last = json::parse(stream_chunk(chat, id, "", {}, false, "length").substr(6));
  EXPECT_EQ(last["choices"][0]["finish_reason"], "length");
  EXPECT_TRUE(last["choices"][0]["delta"].empty());
  ApiRequest text;
  text.include_usage = true;
  const json u = json::parse(stream_usage_chunk(text, {"cmpl-2", 1, "m"}, {4, 6}).substr(6));
  EXPECT_EQ(u["object"], "text_completion");
  EXPECT_TRUE(u["choices"].empty());
  EXPECT_EQ(u["usage"]["completion_tokens"], 6);
  // Bytes that are not UTF-8 (a token cut mid-character) are replaced, not an exception.
  EXPECT_NO_THROW(json::parse(completion_body(text, id, "\xe2\x82", "length", {}, {})));
}

}  // namespace
}  // namespace ssd
