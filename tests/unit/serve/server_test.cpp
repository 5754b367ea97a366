// `ssd serve` as a client meets it: a real server process on 127.0.0.1 (ephemeral port) over a
// tiny model the test writes. Every endpoint, every error case (and the server still serving
// after each), SSE framing, stop strings and stop token ids, a client that disconnects
// mid-stream, batch invariance (concurrent greedy requests get the tokens they get alone, and
// the tokens `ssd generate` prints), SD mode's greedy output, a full queue, and the SIGTERM drain.
#include <gtest/gtest.h>

#include <boost/asio.hpp>
#include <nlohmann/json.hpp>
#include <fstream>
#include <map>
#include <memory>
#include <thread>

#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tiny_model.h"
#include "tests/unit/serve/serve_fixture.h"

namespace ssd {
namespace {

using json = nlohmann::json;
using test::http_call;
using test::HttpReply;
using test::metric;
using test::ServeProcess;
using test::sse_events;

constexpr const char* kKey = "sekrit";

// The tiny model, written once per context length for the suite: 4096 so long requests fit,
// 16384 for requests that last long enough to be interrupted.
const std::string& tiny_model(int64_t context = 4096) {
  static test::TempDir dir;  // removed at exit
  static std::map<int64_t, std::string> paths;
  std::string& path = paths[context];
  if (path.empty()) {
    test::TinyModelSpec spec = test::tiny_spec(Arch::Llama, DType::Q8_0);
    spec.context = context;
    path = test::write_tiny_gguf(spec, dir.file("tiny" + std::to_string(context) + ".gguf"));
  }
  return path;
}

std::string server_flags(const std::string& extra, int64_t context = 4096) {
  return "-m " + test::shell_quote(tiny_model(context)) + " -t 1 --served-model-name tiny " +
         extra;
}

HttpReply post(int port, const std::string& path, const json& body, bool auth = true) {
  std::vector<std::pair<std::string, std::string>> h;
  if (auth) h.emplace_back("Authorization", std::string("Bearer ") + kKey);
  return http_call(port, "POST", path, body.dump(), h);
}

json greedy(const std::string& prompt, int64_t max_tokens) {
  return {{"model", "tiny"},
          {"prompt", prompt},
          {"max_tokens", max_tokens},
          {"temperature", 0},
          {"ignore_eos", true},
          {"return_token_ids", true}};
}

std::vector<int32_t> token_ids(const HttpReply& r) {
  EXPECT_EQ(r.status, 200) << r.body;
  return json::parse(r.body)["choices"][0]["token_ids"].get<std::vector<int32_t>>();
}

// The error object every error response carries.
void expect_error(const HttpReply& r, int status, const std::string& param = {}) {
  EXPECT_EQ(r.status, status) << r.body;
  const json j = json::parse(r.body);
  ASSERT_TRUE(j.contains("error")) << r.body;
  for (const char* key : {"message", "type", "param", "code"})
    EXPECT_TRUE(j["error"].contains(key)) << key << " missing in " << r.body;
  EXPECT_FALSE(j["error"]["message"].get<std::string>().empty());
  if (!param.empty()) {
    EXPECT_EQ(j["error"]["param"], json(param)) << r.body;
  }
}

// The server shared by the endpoint and error tests: batch 4, bodies up to 16 KiB, a key.
class Serve : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new ServeProcess(
        server_flags(std::string("--max-batch 4 --max-body 16384 --api-key ") + kKey));
  }
  static void TearDownTestSuite() {
    if (!server_) return;
    EXPECT_EQ(server_->terminate(), 0) << server_->log();
    delete server_;
  }
  static int port() { return server_->port(); }
  static std::string metrics_text() { return http_call(port(), "GET", "/metrics").body; }
  static inline ServeProcess* server_ = nullptr;
};

TEST_F(Serve, HealthModelsAndMetrics) {
  const HttpReply h = http_call(port(), "GET", "/health");
  EXPECT_EQ(h.status, 200);
  EXPECT_EQ(json::parse(h.body)["status"], "ok");
  const HttpReply m =
      http_call(port(), "GET", "/v1/models", {}, {{"Authorization", std::string("Bearer ") + kKey}});
  ASSERT_EQ(m.status, 200) << m.body;
  const json models = json::parse(m.body);
  EXPECT_EQ(models["object"], "list");
  ASSERT_EQ(models["data"].size(), 1u);
  EXPECT_EQ(models["data"][0]["id"], "tiny");
  EXPECT_EQ(models["data"][0]["max_model_len"], 4096);
  const HttpReply p = http_call(port(), "GET", "/metrics");
  EXPECT_EQ(p.status, 200);
  EXPECT_TRUE(p.headers.at("content-type").starts_with("text/plain"));
  for (const char* name :
       {"ssd:spec_decode_num_drafts_total", "ssd:spec_decode_num_draft_tokens_total",
        "ssd:spec_decode_num_accepted_tokens_total", "ssd:spec_decode_cache_hit_rate",
        "ssd:spec_decode_target_wait_seconds_total", "ssd:num_requests_waiting",
        "ssd:num_requests_running"})
    EXPECT_GE(metric(p.body, name), 0) << name;
  for (const char* hist : {"ssd:time_to_first_token_seconds", "ssd:time_per_output_token_seconds",
                           "ssd:e2e_request_latency_seconds"})
    EXPECT_NE(p.body.find(std::string(hist) + "_bucket{"), std::string::npos) << hist;
}

TEST_F(Serve, ChatCompletionWithUsage) {
  const json body = {{"model", "tiny"},
                     {"messages", {{{"role", "system"}, {"content", "be brief"}},
                                   {{"role", "user"}, {"content", "the cat"}}}},
                     {"max_tokens", 8},
                     {"temperature", 0},
                     {"ignore_eos", true}};
  const HttpReply r = post(port(), "/v1/chat/completions", body);
  ASSERT_EQ(r.status, 200) << r.body;
  const json j = json::parse(r.body);
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["model"], "tiny");
  EXPECT_EQ(j["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(j["usage"]["completion_tokens"], 8);
  EXPECT_GT(j["usage"]["prompt_tokens"].get<int>(), 4);
  EXPECT_EQ(j["usage"]["total_tokens"].get<int>(),
            j["usage"]["prompt_tokens"].get<int>() + j["usage"]["completion_tokens"].get<int>());
}

TEST_F(Serve, CompletionFromTokenIds) {
  json body = greedy("", 6);
  body["prompt"] = {1, 2, 3, 4};
  const HttpReply r = post(port(), "/v1/completions", body);
  ASSERT_EQ(r.status, 200) << r.body;
  const json j = json::parse(r.body);
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["usage"]["prompt_tokens"], 4);
  EXPECT_EQ(j["choices"][0]["token_ids"].size(), 6u);
}

TEST_F(Serve, StreamFramingMatchesTheWholeResponse) {
  json body = {{"model", "tiny"},
               {"messages", {{{"role", "user"}, {"content", "hello"}}}},
               {"max_tokens", 12},
               {"temperature", 0},
               {"ignore_eos", true},
               {"return_token_ids", true}};
  const HttpReply whole = post(port(), "/v1/chat/completions", body);
  ASSERT_EQ(whole.status, 200) << whole.body;
  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  const HttpReply s = post(port(), "/v1/chat/completions", body);
  ASSERT_EQ(s.status, 200) << s.body;
  EXPECT_TRUE(s.headers.at("content-type").starts_with("text/event-stream"));
  const std::vector<std::string> ev = sse_events(s.body);
  ASSERT_GE(ev.size(), 4u) << s.body;
  EXPECT_EQ(ev.back(), "[DONE]");
  std::string text;
  std::vector<int32_t> ids;
  std::string id;
  for (size_t i = 0; i + 1 < ev.size(); ++i) {
    const json c = json::parse(ev[i]);
    EXPECT_EQ(c["object"], "chat.completion.chunk");
    if (i == 0) id = c["id"];
    EXPECT_EQ(c["id"], id);
    if (i + 2 == ev.size()) {  // the usage chunk
      EXPECT_TRUE(c["choices"].empty());
      EXPECT_EQ(c["usage"]["completion_tokens"], 12);
      continue;
    }
    const json& ch = c["choices"][0];
    if (i == 0) {
      EXPECT_EQ(ch["delta"]["role"], "assistant");
    }
    if (ch["delta"].contains("content")) text += ch["delta"]["content"].get<std::string>();
    if (ch.contains("token_ids"))
      for (int32_t t : ch["token_ids"]) ids.push_back(t);
    const bool last_choice = i + 3 == ev.size();
    EXPECT_EQ(ch["finish_reason"].is_null(), !last_choice) << ev[i];
    if (last_choice) {
      EXPECT_EQ(ch["finish_reason"], "length");
    }
  }
  const json w = json::parse(whole.body)["choices"][0];
  EXPECT_EQ(text, w["message"]["content"].get<std::string>());
  EXPECT_EQ(ids, w["token_ids"].get<std::vector<int32_t>>());
}

TEST_F(Serve, StopTokenIdsAndStopStrings) {
  const HttpReply base = post(port(), "/v1/completions", greedy("the cat sat", 24));
  const std::vector<int32_t> ids = token_ids(base);
  ASSERT_EQ(ids.size(), 24u);
  // A stop token: generation ends with it (counted, no text of its own).
  const int32_t stop_tok = ids[5];
  const size_t first = std::find(ids.begin(), ids.end(), stop_tok) - ids.begin();
  json body = greedy("the cat sat", 24);
  body["stop_token_ids"] = {stop_tok};
  const HttpReply r = post(port(), "/v1/completions", body);
  const std::vector<int32_t> got = token_ids(r);
  EXPECT_EQ(got, std::vector<int32_t>(ids.begin(), ids.begin() + first + 1));
  EXPECT_EQ(json::parse(r.body)["choices"][0]["finish_reason"], "stop");
  // A stop string: the text ends just before its first occurrence.
  const std::string text = json::parse(base.body)["choices"][0]["text"];
  size_t at = std::string::npos;
  for (size_t i = 2; i < text.size() && at == std::string::npos; ++i)
    if (std::isalnum(static_cast<unsigned char>(text[i]))) at = i;
  if (at == std::string::npos) GTEST_SKIP() << "no ASCII letter in the sample text";
  const std::string stop(1, text[at]);
  body = greedy("the cat sat", 24);
  body["stop"] = stop;
  for (bool stream : {false, true}) {
    body["stream"] = stream;
    const HttpReply s = post(port(), "/v1/completions", body);
    ASSERT_EQ(s.status, 200) << s.body;
    std::string out;
    std::string finish;
    if (!stream) {
      out = json::parse(s.body)["choices"][0]["text"];
      finish = json::parse(s.body)["choices"][0]["finish_reason"];
    } else {
      for (const std::string& e : sse_events(s.body)) {
        if (e == "[DONE]") continue;
        const json c = json::parse(e);
        out += c["choices"][0]["text"].get<std::string>();
        if (!c["choices"][0]["finish_reason"].is_null()) finish = c["choices"][0]["finish_reason"];
      }
    }
    EXPECT_EQ(out, text.substr(0, text.find(stop))) << "stream " << stream;
    EXPECT_EQ(finish, "stop");
  }
}

TEST_F(Serve, EveryErrorCaseAndTheServerGoesOn) {
  auto raw = [&](const std::string& body) {
    return http_call(port(), "POST", "/v1/completions", body,
                     {{"Authorization", std::string("Bearer ") + kKey}});
  };
  expect_error(raw("{\"prompt\": \"x\", "), 400);
  EXPECT_EQ(json::parse(raw("{nope").body)["error"]["code"], "invalid_json");
  json b = greedy("x", 4);
  b["max_tokens"] = "ten";
  expect_error(post(port(), "/v1/completions", b), 400, "max_tokens");
  b = greedy("x", 4);
  b["prompt"] = 7;
  expect_error(post(port(), "/v1/completions", b), 400, "prompt");
  b = greedy("x", 4);
  b["stream"] = "yes";
  expect_error(post(port(), "/v1/completions", b), 400, "stream");
  expect_error(post(port(), "/v1/completions", greedy("x", 0)), 400, "max_tokens");
  expect_error(post(port(), "/v1/completions", greedy("x", -3)), 400, "max_tokens");
  b = greedy("x", 4);
  b["temperature"] = -0.5;
  expect_error(post(port(), "/v1/completions", b), 400, "temperature");
  b = greedy("x", 4);
  b["n"] = 2;
  expect_error(post(port(), "/v1/completions", b), 400, "n");
  // The context: prompt + max_tokens over it, and a prompt alone over it; both lengths named.
  json chat = {{"messages", {{{"role", "user"}, {"content", std::string(3000, 'a')}}}},
               {"max_tokens", 2000}};
  const HttpReply ctx = post(port(), "/v1/chat/completions", chat);
  expect_error(ctx, 400, "max_tokens");
  const std::string msg = json::parse(ctx.body)["error"]["message"];
  EXPECT_NE(msg.find("4096"), std::string::npos) << msg;
  EXPECT_NE(msg.find("2000"), std::string::npos) << msg;
  chat = {{"messages", {{{"role", "user"}, {"content", std::string(5000, 'a')}}}}};
  const HttpReply too_long = post(port(), "/v1/chat/completions", chat);
  expect_error(too_long, 400, "messages");
  const std::string m2 = json::parse(too_long.body)["error"]["message"];
  EXPECT_NE(m2.find("4096"), std::string::npos) << m2;
  EXPECT_EQ(json::parse(too_long.body)["error"]["code"], "context_length_exceeded");
  // Over --max-body (16384 bytes).
  expect_error(raw(json{{"prompt", std::string(20000, 'a')}}.dump()), 413);
  // Paths and methods.
  expect_error(http_call(port(), "GET", "/v1/nothing"), 404);
  const HttpReply m = http_call(port(), "GET", "/v1/chat/completions", {},
                                {{"Authorization", std::string("Bearer ") + kKey}});
  expect_error(m, 405);
  EXPECT_EQ(m.headers.at("allow"), "POST");
  expect_error(http_call(port(), "DELETE", "/health"), 405);
  // The key.
  expect_error(post(port(), "/v1/completions", greedy("x", 4), /*auth=*/false), 401);
  expect_error(http_call(port(), "POST", "/v1/completions", greedy("x", 4).dump(),
                         {{"Authorization", "Bearer wrong"}}),
               401);
  expect_error(http_call(port(), "GET", "/v1/models"), 401);
  // Still serving.
  EXPECT_EQ(token_ids(post(port(), "/v1/completions", greedy("x", 4))).size(), 4u);
}

TEST_F(Serve, ClientThatLeavesMidStreamIsFreed) {
  const double aborted0 = metric(metrics_text(), "ssd:request_success_total",
                                 "finished_reason=\"abort\"");
  {
    boost::asio::io_context io;
    boost::asio::ip::tcp::socket sock(io);
    sock.connect({boost::asio::ip::make_address("127.0.0.1"), static_cast<uint16_t>(port())});
    json body = greedy("a long one", 3500);
    body["stream"] = true;
    const std::string b = body.dump();
    const std::string req = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " +
                            std::string(kKey) + "\r\nContent-Type: application/json\r\n"
                            "Content-Length: " + std::to_string(b.size()) + "\r\n\r\n" + b;
    boost::asio::write(sock, boost::asio::buffer(req));
    std::string got;
    char buf[512];
    while (got.find("data: ") == std::string::npos) {  // the stream has begun
      const size_t n = sock.read_some(boost::asio::buffer(buf));
      got.append(buf, n);
      ASSERT_LT(got.size(), 1u << 20);
    }
  }  // the client closes the connection mid-stream
  std::string text;
  for (int i = 0; i < 600; ++i) {  // up to 60 s
    text = metrics_text();
    if (metric(text, "ssd:request_success_total", "finished_reason=\"abort\"") > aborted0 &&
        metric(text, "ssd:num_requests_running") == 0)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(metric(text, "ssd:request_success_total", "finished_reason=\"abort\""), aborted0 + 1);
  EXPECT_EQ(metric(text, "ssd:num_requests_running"), 0);
  // Its KV pages are back: a request that needs nearly the whole cache is admitted and finishes.
  const HttpReply r = post(port(), "/v1/completions", greedy("x", 3900));
  EXPECT_EQ(token_ids(r).size(), 3900u);
}

const std::vector<std::string> kPrompts = {"the cat", "hello there", "a b c d", "zzz top"};

// Each prompt alone, then all at once: the same tokens. Returns the tokens of each prompt.
std::vector<std::vector<int32_t>> check_batch_invariance(int port, int64_t n, const std::string& metrics_key = {}) {
  std::vector<std::vector<int32_t>> alone;
  for (const std::string& p : kPrompts)
    alone.push_back(token_ids(http_call(port, "POST", "/v1/completions", greedy(p, n).dump())));
  const std::string before = http_call(port, "GET", "/metrics").body;
  std::vector<std::vector<int32_t>> together(kPrompts.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < kPrompts.size(); ++i)
    threads.emplace_back([&, i] {
      together[i] =
          token_ids(http_call(port, "POST", "/v1/completions", greedy(kPrompts[i], n).dump()));
    });
  for (auto& t : threads) t.join();
  const std::string after = http_call(port, "GET", "/metrics").body;
  for (size_t i = 0; i < kPrompts.size(); ++i) {
    EXPECT_EQ(alone[i].size(), static_cast<size_t>(n));
    EXPECT_EQ(together[i], alone[i]) << "prompt '" << kPrompts[i] << "'";
  }
  // The concurrent requests did share rounds: more sequences than rounds.
  const double rounds = metric(after, "ssd:rounds_total") - metric(before, "ssd:rounds_total");
  const double seqs =
      metric(after, "ssd:sequence_rounds_total") - metric(before, "ssd:sequence_rounds_total");
  EXPECT_GT(seqs, 1.2 * rounds) << "the requests did not overlap (" << seqs << " over " << rounds
                                << " rounds)";
  return alone;
}

std::vector<int32_t> generate_ids(const std::string& prompt, int64_t n) {
  test::TempDir tmp;
  const std::string stats = tmp.file("stats.json");
  const auto r = test::run_command(test::shell_quote(test::project_binary("ssd")) + " generate -m " +
                                   test::shell_quote(tiny_model()) + " -t 1 -q --ignore-eos -p " +
                                   test::shell_quote(prompt) + " -n " + std::to_string(n) +
                                   " --stats-json " + test::shell_quote(stats));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::ifstream in(stats);
  return json::parse(in)["output_token_ids"].get<std::vector<int32_t>>();
}

TEST(ServeBatch, ConcurrentGreedyRequestsGetTheirSingleOutputsAndGeneratesOutput) {
  ServeProcess server(server_flags("--max-batch 4"));
  const auto alone = check_batch_invariance(server.port(), 300);
  for (size_t i = 0; i < kPrompts.size(); ++i)
    EXPECT_EQ(alone[i], generate_ids(kPrompts[i], 300)) << "prompt '" << kPrompts[i] << "'";
  EXPECT_EQ(server.terminate(), 0) << server.log();
}

TEST(ServeBatch, SdModeGreedyEqualsAr) {
  ServeProcess server(server_flags("--max-batch 4 --mode sd --drafter ngram --k 3"));
  const auto alone = check_batch_invariance(server.port(), 200);
  for (size_t i = 0; i < kPrompts.size(); ++i)
    EXPECT_EQ(alone[i], generate_ids(kPrompts[i], 200)) << "prompt '" << kPrompts[i] << "'";
  const std::string m = http_call(server.port(), "GET", "/metrics").body;
  EXPECT_GE(metric(m, "ssd:spec_decode_num_accepted_tokens_per_pos_total", "position=\"2\""), 0);
  EXPECT_EQ(server.terminate(), 0) << server.log();
}

// --k auto is the default: each sequence's length chosen per round by the length policy.
TEST(ServeBatch, SdModeAutoKGreedyEqualsAr) {
  ServeProcess server(server_flags("--max-batch 4 --mode sd --drafter ngram --k-max 4"));
  const auto alone = check_batch_invariance(server.port(), 200);
  for (size_t i = 0; i < kPrompts.size(); ++i)
    EXPECT_EQ(alone[i], generate_ids(kPrompts[i], 200)) << "prompt '" << kPrompts[i] << "'";
  const std::string m = http_call(server.port(), "GET", "/metrics").body;
  const double chosen = metric(m, "ssd:spec_length_chosen_count");
  EXPECT_GT(chosen, 0);  // one per sequence-round, each in 0..--k-max
  EXPECT_EQ(metric(m, "ssd:spec_length_chosen_bucket", "le=\"4\""), chosen);
  EXPECT_EQ(metric(m, "ssd:spec_length_chosen_count"), metric(m, "ssd:sequence_rounds_total"));
  EXPECT_NE(server.log().find("k auto<=4"), std::string::npos) << server.log();
  EXPECT_EQ(server.terminate(), 0) << server.log();
}

// Streams a long greedy request on its own thread; records the finish reason and token count.
struct LongStream {
  std::thread t;
  std::string finish;
  int64_t tokens = 0;
  ~LongStream() {
    if (t.joinable()) t.join();
  }
  LongStream(int port, int64_t n) {
    t = std::thread([this, port, n] {
      json body = greedy("long", n);
      body["stream"] = true;
      body["stream_options"] = {{"include_usage", true}};
      const HttpReply r = http_call(port, "POST", "/v1/completions", body.dump());
      for (const std::string& e : sse_events(r.body)) {
        if (e == "[DONE]") continue;
        const json c = json::parse(e);
        if (c.contains("usage") && c["usage"].is_object())
          tokens = c["usage"]["completion_tokens"];
        else if (!c["choices"][0]["finish_reason"].is_null())
          finish = c["choices"][0]["finish_reason"];
      }
    });
  }
};

void wait_running(int port, int64_t n) {
  for (int i = 0; i < 600; ++i) {
    if (metric(http_call(port, "GET", "/metrics").body, "ssd:num_requests_running") == n) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  FAIL() << "never " << n << " running";
}

TEST(ServeLimits, FullQueueGets503) {
  ServeProcess server(server_flags("--max-batch 1 --max-queue 0"));
  LongStream a(server.port(), 3000);
  wait_running(server.port(), 1);
  const HttpReply r = http_call(server.port(), "POST", "/v1/completions", greedy("x", 4).dump());
  expect_error(r, 503);
  EXPECT_EQ(json::parse(r.body)["error"]["code"], "overloaded");
  a.t.join();
  EXPECT_EQ(a.tokens, 3000);
  EXPECT_EQ(server.terminate(), 0) << server.log();
}

TEST(ServeLimits, SigtermDrainsInFlightAndRefusesNew) {
  ServeProcess server(server_flags("--max-batch 2 --ctx-size 16384", 16384));
  // Both fit the cache at once, and last long enough (seconds) to be in flight at the SIGTERM.
  LongStream a(server.port(), 8000), b(server.port(), 8000);
  wait_running(server.port(), 2);
  server.signal_term();
  // The signal is handled asynchronously: /health turns 503 once the drain has begun (a request
  // sent before that is queued, and served, like any other in flight).
  HttpReply h;
  for (int i = 0; i < 600; ++i) {
    h = http_call(server.port(), "GET", "/health");
    if (h.status == 503) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(h.status, 503);
  EXPECT_EQ(json::parse(h.body)["status"], "draining");
  // New requests are refused while the two in flight go on.
  const HttpReply r = http_call(server.port(), "POST", "/v1/completions", greedy("x", 4).dump());
  expect_error(r, 503);
  EXPECT_EQ(json::parse(r.body)["error"]["code"], "draining");
  a.t.join();
  b.t.join();
  EXPECT_EQ(a.finish, "length");
  EXPECT_EQ(b.finish, "length");
  EXPECT_EQ(a.tokens, 8000);
  EXPECT_EQ(b.tokens, 8000);
  EXPECT_EQ(server.wait_exit(), 0) << server.log();
}

}  // namespace
}  // namespace ssd
