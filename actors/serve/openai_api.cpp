#include "actors/serve/openai_api.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

namespace ssd {
namespace {

using json = nlohmann::json;

[[noreturn]] void bad(const std::string& param, const std::string& message) {
  throw ApiError{400, message, "invalid_request_error", param, ""};
}

const char* type_name(const json& v) { return v.type_name(); }

double number(const json& body, const char* key, double lo, double hi) {
  const json& v = body[key];
  if (!v.is_number())
    bad(key, fmt::format("'{}' must be a number, not {}", key, type_name(v)));
  const double x = v.get<double>();
  if (!std::isfinite(x) || x < lo || x > hi)
    bad(key, fmt::format("'{}' is {}; it must be in [{}, {}]", key, x, lo, hi));
  return x;
}

int64_t integer(const json& body, const char* key) {
  const json& v = body[key];
  if (!v.is_number_integer())
    bad(key, fmt::format("'{}' must be an integer, not {}", key, type_name(v)));
  return v.get<int64_t>();
}

bool boolean(const json& body, const char* key) {
  const json& v = body[key];
  if (!v.is_boolean()) bad(key, fmt::format("'{}' must be a boolean, not {}", key, type_name(v)));
  return v.get<bool>();
}

std::vector<int32_t> token_ids(const json& v, const char* key) {
  if (!v.is_array()) bad(key, fmt::format("'{}' must be a list of token ids", key));
  std::vector<int32_t> out;
  for (const json& t : v) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 ||
        t.get<int64_t>() > std::numeric_limits<int32_t>::max())
      bad(key, fmt::format("'{}' must hold non-negative integer token ids", key));
    out.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  return out;
}

std::string content_text(const json& content, size_t i) {
  if (content.is_string()) return content.get<std::string>();
  if (content.is_null()) return {};
  const std::string param = fmt::format("messages[{}].content", i);
  if (!content.is_array()) bad(param, fmt::format("'{}' must be a string or a list of parts", param));
  std::string text;
  for (const json& part : content) {
    if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") ||
        !part["text"].is_string())
      bad(param, fmt::format("'{}': only text parts ({{\"type\": \"text\", \"text\": ...}}) are "
                             "supported",
                             param));
    text += part["text"].get<std::string>();
  }
  return text;
}

void parse_messages(const json& body, ApiRequest& r) {
  if (!body.contains("messages")) bad("messages", "'messages' is required");
  const json& m = body["messages"];
  if (!m.is_array() || m.empty()) bad("messages", "'messages' must be a non-empty list");
  for (size_t i = 0; i < m.size(); ++i) {
    const json& msg = m[i];
    const std::string param = fmt::format("messages[{}]", i);
    if (!msg.is_object()) bad(param, fmt::format("'{}' must be an object", param));
    if (!msg.contains("role") || !msg["role"].is_string())
      bad(param + ".role", fmt::format("'{}.role' must be a string", param));
    const std::string role = msg["role"].get<std::string>();
    if (role != "system" && role != "user" && role != "assistant" && role != "developer")
      bad(param + ".role", fmt::format("'{}.role' '{}' is not system, user or assistant", param,
                                       role));
    r.messages.push_back(ChatMessage{role == "developer" ? "system" : role,
                                     content_text(msg.value("content", json()), i)});
  }
}

void parse_prompt(const json& body, ApiRequest& r) {
  if (!body.contains("prompt")) bad("prompt", "'prompt' is required");
  const json& p = body["prompt"];
  if (p.is_string()) {
    r.prompt_text = p.get<std::string>();
  } else if (p.is_array() && p.size() == 1 && p[0].is_string()) {
    r.prompt_text = p[0].get<std::string>();
  } else if (p.is_array() && !p.empty() && p[0].is_number_integer()) {
    r.prompt_ids = token_ids(p, "prompt");
  } else if (p.is_array() && p.size() > 1) {
    bad("prompt", "one prompt per request: a list of several prompts is not supported");
  } else {
    bad("prompt", fmt::format("'prompt' must be a string or a list of token ids, not {}",
                              type_name(p)));
  }
}

void parse_stop(const json& body, ApiRequest& r) {
  if (!body.contains("stop") || body["stop"].is_null()) return;
  const json& s = body["stop"];
  if (s.is_string()) {
    r.stop.push_back(s.get<std::string>());
  } else if (s.is_array()) {
    if (s.size() > 4) bad("stop", "'stop' holds at most 4 strings");
    for (const json& x : s) {
      if (!x.is_string()) bad("stop", "'stop' must be a string or a list of strings");
      r.stop.push_back(x.get<std::string>());
    }
  } else {
    bad("stop", fmt::format("'stop' must be a string or a list of strings, not {}", type_name(s)));
  }
  for (const std::string& x : r.stop)
    if (x.empty()) bad("stop", "'stop' strings must not be empty");
}

}  // namespace

ApiRequest parse_api_request(std::string_view body_text, bool chat) {
  json body;
  try {
    body = json::parse(body_text);
  } catch (const json::parse_error& e) {
    throw ApiError{400, fmt::format("the body is not valid JSON: {}", e.what()),
                   "invalid_request_error", "", "invalid_json"};
  }
  if (!body.is_object()) bad("", "the body must be a JSON object");
  ApiRequest r;
  r.chat = chat;
  if (body.contains("model") && !body["model"].is_null()) {
    if (!body["model"].is_string()) bad("model", "'model' must be a string");
    r.model = body["model"].get<std::string>();
  }
  if (chat) parse_messages(body, r);
  else parse_prompt(body, r);
  for (const char* key : {"max_tokens", "max_completion_tokens"}) {
    if (!body.contains(key) || body[key].is_null()) continue;
    const int64_t n = integer(body, key);
    if (n <= 0) bad(key, fmt::format("'{}' is {}; it must be at least 1", key, n));
    r.max_tokens = n;
  }
  if (body.contains("temperature") && !body["temperature"].is_null())
    r.temperature = number(body, "temperature", 0, 100);
  if (body.contains("top_p") && !body["top_p"].is_null()) {
    r.top_p = number(body, "top_p", 0, 1);
    if (r.top_p <= 0) bad("top_p", "'top_p' must be greater than 0");
  }
  if (body.contains("min_p") && !body["min_p"].is_null()) r.min_p = number(body, "min_p", 0, 1);
  if (body.contains("top_k") && !body["top_k"].is_null()) {
    const int64_t k = integer(body, "top_k");
    if (k < -1 || k > std::numeric_limits<int32_t>::max())
      bad("top_k", fmt::format("'top_k' is {}; use -1 or 0 for off, or a positive count", k));
    r.top_k = k < 0 ? 0 : static_cast<int32_t>(k);
  }
  if (body.contains("seed") && !body["seed"].is_null()) {
    const json& s = body["seed"];
    if (!s.is_number_integer()) bad("seed", "'seed' must be an integer");
    r.seed = s.is_number_unsigned() ? s.get<uint64_t>() : static_cast<uint64_t>(s.get<int64_t>());
  }
  if (body.contains("n") && !body["n"].is_null() && integer(body, "n") != 1)
    bad("n", "only n = 1 is supported");
  parse_stop(body, r);
  if (body.contains("stop_token_ids") && !body["stop_token_ids"].is_null())
    r.stop_token_ids = token_ids(body["stop_token_ids"], "stop_token_ids");
  if (body.contains("stream") && !body["stream"].is_null()) r.stream = boolean(body, "stream");
  if (body.contains("stream_options") && !body["stream_options"].is_null()) {
    const json& o = body["stream_options"];
    if (!o.is_object()) bad("stream_options", "'stream_options' must be an object");
    if (o.contains("include_usage")) {
      if (!o["include_usage"].is_boolean())
        bad("stream_options.include_usage", "'stream_options.include_usage' must be a boolean");
      r.include_usage = o["include_usage"].get<bool>();
    }
  }
  if (body.contains("ignore_eos") && !body["ignore_eos"].is_null())
    r.ignore_eos = boolean(body, "ignore_eos");
  if (body.contains("return_token_ids") && !body["return_token_ids"].is_null())
    r.return_token_ids = boolean(body, "return_token_ids");
  return r;
}

std::string error_body(const ApiError& e) {
  json err = {{"message", e.message},
              {"type", e.type},
              {"param", e.param.empty() ? json() : json(e.param)},
              {"code", e.code.empty() ? json() : json(e.code)}};
  return json{{"error", err}}.dump(-1, ' ', false, json::error_handler_t::replace);
}

namespace {

json usage_json(const Usage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens}};
}

json head(const ApiRequest& r, const ResponseId& id, bool chunk) {
  const char* object = r.chat ? (chunk ? "chat.completion.chunk" : "chat.completion")
                              : "text_completion";
  return {{"id", id.id}, {"object", object}, {"created", id.created}, {"model", id.model}};
}

// Generated bytes need not be valid UTF-8 at a request's end (a token can stop mid-character):
// such bytes go out as U+FFFD; return_token_ids keeps the exact tokens.
std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

}  // namespace

std::string completion_body(const ApiRequest& r, const ResponseId& id, const std::string& text,
                            const std::string& finish_reason, const Usage& usage,
                            const std::vector<int32_t>& token_ids) {
  json choice = {{"index", 0}, {"finish_reason", finish_reason}, {"logprobs", nullptr}};
  if (r.chat) choice["message"] = {{"role", "assistant"}, {"content", text}};
  else choice["text"] = text;
  if (r.return_token_ids) choice["token_ids"] = token_ids;
  json j = head(r, id, false);
  j["choices"] = json::array({choice});
  j["usage"] = usage_json(usage);
  return dump(j);
}

std::string stream_chunk(const ApiRequest& r, const ResponseId& id, const std::string& text,
                         const std::vector<int32_t>& token_ids, bool first,
                         const std::string& finish_reason) {
  json choice = {{"index", 0},
                 {"finish_reason", finish_reason.empty() ? json() : json(finish_reason)},
                 {"logprobs", nullptr}};
  if (r.chat) {
    json delta = json::object();
    if (first) delta["role"] = "assistant";
    if (!text.empty() || (first && finish_reason.empty())) delta["content"] = text;
    choice["delta"] = delta;
  } else {
    choice["text"] = text;
  }
  if (r.return_token_ids) choice["token_ids"] = token_ids;
  json j = head(r, id, true);
  j["choices"] = json::array({choice});
  if (r.include_usage) j["usage"] = nullptr;
  return "data: " + dump(j) + "\n\n";
}

std::string stream_usage_chunk(const ApiRequest& r, const ResponseId& id, const Usage& usage) {
  json j = head(r, id, true);
  j["choices"] = json::array();
  j["usage"] = usage_json(usage);
  return "data: " + dump(j) + "\n\n";
}

std::string models_body(const std::string& model, int64_t created, int64_t context_length) {
  json m = {{"id", model},
            {"object", "model"},
            {"created", created},
            {"owned_by", "ssd"},
            {"max_model_len", context_length}};
  return json{{"object", "list"}, {"data", json::array({m})}}.dump();
}

}  // namespace ssd
