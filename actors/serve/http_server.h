// A small HTTP/1.1 server on Boost.Beast: one acceptor (an Asio io_context on its own thread) and
// one thread per connection, which reads requests (keep-alive), hands each to the handler and
// writes its answer: a whole response, or a chunked stream (server-sent events) whose writes
// report a client that has gone. The connection count is capped; beyond it a connection gets 503
// at once. What the server answers itself: 413 for a body over max_body (the declared
// Content-Length is checked before the body is read), 400 for a malformed request. Everything
// else (paths, methods, authentication) is the handler's.
//
// Loopback or any address; port 0 binds an ephemeral port (port() says which).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

namespace ssd {

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string path;    // target without the query string
  std::string authorization;
  std::string body;
};

// How a handler answers: respond() once, or start_stream(), write()s, end_stream().
class HttpResponder {
 public:
  virtual ~HttpResponder() = default;
  virtual void respond(int status, std::string_view content_type, std::string body,
                       std::initializer_list<std::pair<std::string_view, std::string_view>>
                           extra_headers = {}) = 0;
  // Returns false when the client has gone (so do write()s).
  virtual bool start_stream(int status, std::string_view content_type) = 0;
  virtual bool write(std::string_view data) = 0;
  virtual void end_stream() = 0;
};

using HttpHandler = std::function<void(const HttpRequest&, HttpResponder&)>;

struct HttpOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 8080;
  int64_t max_body = 1 << 20;      // bytes
  int64_t max_connections = 256;   // open at once
  double idle_timeout_s = 60;      // a keep-alive connection idle this long is closed
};

class HttpServer {
 public:
  // Binds and listens (ssd::Error naming host:port when it cannot); serving starts with start().
  HttpServer(const HttpOptions& opts, HttpHandler handler);
  ~HttpServer();  // stop()
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  uint16_t port() const { return port_; }
  void start();
  // Stops accepting and closes the connections: idle ones at once (a blocked read returns), the
  // ones answering a request once their response is out (up to 30 s); waits for their threads.
  void stop();

 private:
  struct Impl;
  void serve_connection(int64_t id, void* socket);
  std::unique_ptr<Impl> impl_;
  HttpOptions opts_;
  HttpHandler handler_;
  uint16_t port_ = 0;
};

}  // namespace ssd
