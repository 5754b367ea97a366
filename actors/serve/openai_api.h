// The OpenAI wire format, without the server around it: parsing and validating the JSON body of
// POST /v1/chat/completions and /v1/completions (every field checked for its type and range,
// naming it), and formatting responses, stream chunks, the model list and errors
// ({"error": {"message", "type", "param", "code"}}).
//
// Parameters: messages (chat: role + content, a string or a list of text parts) or prompt (a
// string, a list of one string, or a list of token ids), max_tokens (max_completion_tokens
// too), temperature (default 1; 0 = greedy), top_p, top_k (0 or -1 = off), min_p, seed, stop (a
// string or up to 4), stop_token_ids, n (1 only), stream, stream_options.include_usage, and two
// extensions vLLM also has: ignore_eos and return_token_ids (each choice then lists its tokens).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/tokenizer/chat_template.h"

namespace ssd {

// A request error as the client receives it: HTTP status and the OpenAI error object.
struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // the offending field, or empty (JSON null)
  std::string code;   // or empty (JSON null)
};

struct ApiRequest {
  bool chat = false;
  std::string model;                  // empty when not given
  std::vector<ChatMessage> messages;  // chat
  std::string prompt_text;            // completions, when the prompt is text
  std::vector<int32_t> prompt_ids;    // completions, when the prompt is token ids
  std::optional<int64_t> max_tokens;
  double temperature = 1.0, top_p = 1.0, min_p = 0.0;
  int32_t top_k = 0;
  std::optional<uint64_t> seed;
  std::vector<std::string> stop;
  std::vector<int32_t> stop_token_ids;
  bool stream = false, include_usage = false;
  bool ignore_eos = false, return_token_ids = false;
};

// Throws ApiError (400) for malformed JSON, a wrong type or a value out of range.
ApiRequest parse_api_request(std::string_view body, bool chat);

std::string error_body(const ApiError& e);

// The identity of one response: "chatcmpl-<n>" / "cmpl-<n>", its creation time, the model name.
struct ResponseId {
  std::string id;
  int64_t created = 0;
  std::string model;
};

struct Usage {
  int64_t prompt_tokens = 0, completion_tokens = 0;
};

// The whole (non-streamed) response.
std::string completion_body(const ApiRequest& r, const ResponseId& id, const std::string& text,
                            const std::string& finish_reason, const Usage& usage,
                            const std::vector<int32_t>& token_ids);
// One stream chunk ("data: {...}\n\n"): a text delta (chat: the first chunk also carries the
// role), or the last chunk with the finish reason; usage_only: the include_usage chunk (no
// choices).
std::string stream_chunk(const ApiRequest& r, const ResponseId& id, const std::string& text,
                         const std::vector<int32_t>& token_ids, bool first,
                         const std::string& finish_reason);
std::string stream_usage_chunk(const ApiRequest& r, const ResponseId& id, const Usage& usage);
inline constexpr std::string_view kStreamDone = "data: [DONE]\n\n";

std::string models_body(const std::string& model, int64_t created, int64_t context_length);

}  // namespace ssd
