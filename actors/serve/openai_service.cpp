#include "actors/serve/openai_service.h"

#include <fmt/format.h>

#include <algorithm>
#include <ctime>

#include "runtime/core/error.h"
#include "runtime/model/target_model.h"
#include "runtime/tokenizer/chat_template.h"

namespace ssd {
namespace {

constexpr const char* kJson = "application/json";

void send_error(HttpResponder& res, const ApiError& e) {
  res.respond(e.status, kJson, error_body(e));
}

}  // namespace

OpenAiService::OpenAiService(Scheduler& scheduler, const Tokenizer& tok, TargetModel& target,
                             ServeMetrics& metrics, ServiceOptions opts)
    : scheduler_(scheduler),
      tok_(tok),
      target_(target),
      metrics_(metrics),
      opts_(std::move(opts)),
      started_(static_cast<int64_t>(std::time(nullptr))),
      context_(std::min<int64_t>(target.config().context_length, target.capacity().tokens)),
      rng_(std::random_device{}()) {}

void OpenAiService::handle(const HttpRequest& req, HttpResponder& res) {
  struct Route {
    const char* path;
    const char* method;
  };
  static constexpr Route kRoutes[] = {{"/v1/chat/completions", "POST"},
                                      {"/v1/completions", "POST"},
                                      {"/v1/models", "GET"},
                                      {"/health", "GET"},
                                      {"/metrics", "GET"}};
  const Route* route = nullptr;
  for (const Route& r : kRoutes)
    if (req.path == r.path) route = &r;
  if (!route)
    return send_error(res, {404, fmt::format("no route {} {}", req.method, req.path),
                            "invalid_request_error", "", "not_found"});
  if (req.method != route->method) {
    ApiError e{405, fmt::format("{} takes {}, not {}", req.path, route->method, req.method),
               "invalid_request_error", "", "method_not_allowed"};
    return res.respond(405, kJson, error_body(e), {{"Allow", route->method}});
  }
  if (req.path.starts_with("/v1/") && !opts_.api_key.empty() &&
      req.authorization != "Bearer " + opts_.api_key)
    return send_error(res, {401,
                            req.authorization.empty()
                                ? "missing API key: send 'Authorization: Bearer KEY'"
                                : "wrong API key",
                            "invalid_request_error", "", "invalid_api_key"});
  if (req.path == "/health") {
    if (scheduler_.draining()) return res.respond(503, kJson, R"({"status":"draining"})");
    return res.respond(200, kJson, R"({"status":"ok"})");
  }
  if (req.path == "/metrics")
    return res.respond(200, "text/plain; version=0.0.4", metrics_.prometheus_text());
  if (req.path == "/v1/models")
    return res.respond(200, kJson, models_body(opts_.model_name, started_, context_));
  completions(req, res, req.path == "/v1/chat/completions");
}

ServeRequest OpenAiService::build(const ApiRequest& r) {
  if (!r.model.empty() && r.model != opts_.model_name)
    throw ApiError{404, fmt::format("model '{}' is not served here (this server serves '{}')",
                                    r.model, opts_.model_name),
                   "invalid_request_error", "model", "model_not_found"};
  ServeRequest s;
  GenerationRequest& g = s.gen;
  const char* prompt_param = r.chat ? "messages" : "prompt";
  try {
    if (r.chat) {
      const ChatTemplate tmpl = ChatTemplate::from_spec(tok_.spec());
      g.prompt = tok_.encode(tmpl.render(r.messages, /*add_generation_prompt=*/true), true, true);
    } else if (!r.prompt_ids.empty()) {
      g.prompt = r.prompt_ids;
    } else {
      g.prompt = tok_.encode(r.prompt_text, /*add_bos=*/true, /*parse_special=*/true);
    }
  } catch (const Error& e) {
    throw ApiError{400, e.what(), "invalid_request_error", prompt_param, ""};
  }
  const int64_t vocab = target_.config().vocab;
  for (int32_t id : g.prompt)
    if (id >= vocab)
      throw ApiError{400, fmt::format("prompt token id {} is outside the vocabulary (0..{})", id,
                                      vocab - 1),
                     "invalid_request_error", prompt_param, ""};
  if (g.prompt.empty())
    throw ApiError{400, "the prompt is empty", "invalid_request_error", prompt_param, ""};
  const int64_t prompt = static_cast<int64_t>(g.prompt.size());
  const int64_t extra = scheduler_.extra_positions();
  if (prompt + extra >= context_)
    throw ApiError{400,
                   fmt::format("the prompt has {} tokens, but the context holds {} (at least 1 "
                               "token must be generated{})",
                               prompt, context_,
                               extra ? fmt::format(", and {} more are verified ahead", extra) : ""),
                   "invalid_request_error", prompt_param, "context_length_exceeded"};
  const int64_t room = context_ - prompt - extra;
  g.max_new_tokens = r.max_tokens.value_or(r.chat ? room : std::min<int64_t>(16, room));
  if (g.max_new_tokens > room)
    throw ApiError{400,
                   fmt::format("the prompt ({} tokens) + max_tokens {}{} = {} exceeds the context "
                               "of {} tokens",
                               prompt, g.max_new_tokens,
                               extra ? fmt::format(" + {} verified ahead", extra) : "",
                               prompt + g.max_new_tokens + extra, context_),
                   "invalid_request_error", "max_tokens", "context_length_exceeded"};
  g.sampler.temperature = static_cast<float>(r.temperature);
  g.sampler.top_k = r.top_k;
  g.sampler.top_p = static_cast<float>(r.top_p);
  g.sampler.min_p = static_cast<float>(r.min_p);
  if (r.seed) {
    g.sampler.seed = *r.seed;
  } else {
    std::lock_guard lk(rng_mu_);
    g.sampler.seed = rng_();
  }
  try {
    validate(g.sampler);
  } catch (const Error& e) {
    throw ApiError{400, e.what(), "invalid_request_error", "", ""};
  }
  if (!r.ignore_eos) g.stop_ids = tok_.spec().eog_ids;
  for (int32_t id : r.stop_token_ids) {
    if (id >= vocab)
      throw ApiError{400, fmt::format("stop token id {} is outside the vocabulary (0..{})", id,
                                      vocab - 1),
                     "invalid_request_error", "stop_token_ids", ""};
    g.stop_ids.push_back(id);
  }
  s.silent_ids = g.stop_ids;
  s.stops = r.stop;
  return s;
}

ResponseId OpenAiService::response_id(bool chat) {
  return {fmt::format("{}-{}", chat ? "chatcmpl" : "cmpl", next_response_++),
          static_cast<int64_t>(std::time(nullptr)), opts_.model_name};
}

void OpenAiService::completions(const HttpRequest& req, HttpResponder& res, bool chat) {
  ApiRequest r;
  ServeRequest s;
  try {
    r = parse_api_request(req.body, chat);
    s = build(r);
  } catch (const ApiError& e) {
    return send_error(res, e);
  }
  Scheduler::Refusal why{};
  std::shared_ptr<RequestHandle> h = scheduler_.submit(std::move(s), &why);
  if (!h) {
    ApiError e{503,
               why == Scheduler::Refusal::kDraining
                   ? "the server is shutting down and takes no new requests"
                   : "the server is at capacity (--max-batch running and --max-queue waiting); "
                     "retry later",
               "server_error", "", why == Scheduler::Refusal::kDraining ? "draining" : "overloaded"};
    return res.respond(503, kJson, error_body(e), {{"Retry-After", "1"}});
  }
  if (r.stream) stream(r, *h, res);
  else answer(r, *h, res);
}

void OpenAiService::answer(const ApiRequest& r, RequestHandle& h, HttpResponder& res) {
  const ResponseId id = response_id(r.chat);
  std::string text;
  std::vector<int32_t> ids;
  for (;;) {
    for (ServeEvent& e : h.wait(std::chrono::milliseconds(500))) {
      text += e.text;
      ids.insert(ids.end(), e.token_ids.begin(), e.token_ids.end());
      if (!e.final) continue;
      if (e.finish_reason == "error")
        return send_error(res, {500, e.error, "server_error", "", "engine_error"});
      return res.respond(200, kJson,
                         completion_body(r, id, text, e.finish_reason,
                                         {e.prompt_tokens, e.completion_tokens}, ids));
    }
  }
}

void OpenAiService::stream(const ApiRequest& r, RequestHandle& h, HttpResponder& res) {
  const ResponseId id = response_id(r.chat);
  if (!res.start_stream(200, "text/event-stream")) return h.cancel();
  bool first = true;
  // The chat format opens with the role; a completion's first chunk is its first text.
  if (r.chat) {
    if (!res.write(stream_chunk(r, id, "", {}, true, ""))) return h.cancel();
    first = false;
  }
  for (;;) {
    std::vector<ServeEvent> events = h.wait(std::chrono::milliseconds(1000));
    // A second without tokens (queued, or a long prefill): an SSE comment, which clients skip,
    // finds out whether the client is still there.
    if (events.empty() && !res.write(": waiting\n\n")) return h.cancel();
    for (ServeEvent& e : events) {
      bool ok = true;
      if (e.final && e.finish_reason == "error") {
        ApiError err{500, e.error, "server_error", "", "engine_error"};
        ok = res.write("data: " + error_body(err) + "\n\n");
      } else if (e.final) {
        ok = res.write(stream_chunk(r, id, e.text, e.token_ids, first, e.finish_reason));
        if (ok && r.include_usage)
          ok = res.write(stream_usage_chunk(r, id, {e.prompt_tokens, e.completion_tokens}));
      } else if (!e.text.empty() || (r.return_token_ids && !e.token_ids.empty())) {
        ok = res.write(stream_chunk(r, id, e.text, e.token_ids, first, ""));
        first = false;
      }
      if (!ok) return h.cancel();
      if (e.final) {
        if (res.write(kStreamDone)) res.end_stream();
        return;
      }
    }
  }
}

}  // namespace ssd
