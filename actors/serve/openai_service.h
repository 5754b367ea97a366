// The server's routes, over the HTTP server, the OpenAI format and the scheduler:
//   POST /v1/chat/completions, /v1/completions   generate (whole response, or SSE with
//                                                `data: [DONE]` at the end)
//   GET  /v1/models                              the one model served
//   GET  /health                                 200 while serving, 503 while draining
//   GET  /metrics                                Prometheus text (metrics.h)
// With an API key, /v1/* needs `Authorization: Bearer KEY` (401 otherwise). A request is checked
// before it is queued: its prompt must leave room in the context for max_tokens (and the
// verification lookahead), or it gets 400 naming both lengths. A client whose stream breaks is
// cancelled: its sequence leaves the batch at the next round.
#pragma once

#include <atomic>
#include <mutex>
#include <random>
#include <string>

#include "actors/serve/http_server.h"
#include "actors/serve/metrics.h"
#include "actors/serve/openai_api.h"
#include "actors/serve/scheduler.h"

namespace ssd {

struct ServiceOptions {
  std::string model_name;  // the id /v1/models lists and responses carry
  std::string api_key;     // empty: no authentication
};

class OpenAiService {
 public:
  // Every reference must outlive the service.
  OpenAiService(Scheduler& scheduler, const Tokenizer& tok, TargetModel& target,
                ServeMetrics& metrics, ServiceOptions opts);

  void handle(const HttpRequest& req, HttpResponder& res);

 private:
  void completions(const HttpRequest& req, HttpResponder& res, bool chat);
  ServeRequest build(const ApiRequest& r);  // throws ApiError
  void answer(const ApiRequest& r, RequestHandle& h, HttpResponder& res);
  void stream(const ApiRequest& r, RequestHandle& h, HttpResponder& res);
  ResponseId response_id(bool chat);

  Scheduler& scheduler_;
  const Tokenizer& tok_;
  TargetModel& target_;
  ServeMetrics& metrics_;
  ServiceOptions opts_;
  int64_t started_ = 0;  // unix time the service started
  int64_t context_ = 0;  // positions one request may use: min(model context, KV capacity)
  std::atomic<int64_t> next_response_{1};
  std::mutex rng_mu_;
  std::mt19937_64 rng_;  // seeds for requests that give none
};

}  // namespace ssd
