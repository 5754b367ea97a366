#include "actors/serve/http_server.h"

#include <fmt/format.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <utility>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <condition_variable>

#include "runtime/core/error.h"

namespace ssd {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

struct HttpServer::Impl {
  asio::io_context io;
  tcp::acceptor acceptor{io};
  std::thread accept_thread;
  std::mutex mu;
  std::condition_variable cv;
  std::map<int64_t, int> fds;  // open connections: id -> native socket
  std::map<int64_t, bool> busy;  // connections handling a request now
  int64_t next_id = 0;
  bool stopping = false;
  bool started = false;
};

namespace {

beast::string_view bsv(std::string_view s) { return {s.data(), s.size()}; }

constexpr const char* kServerName = "ssd-serve";

// The answer to a connection the server will not serve (over the cap, or a malformed request).
void write_simple(tcp::socket& sock, http::status status, const std::string& body) {
  http::response<http::string_body> res{status, 11};
  res.set(http::field::server, kServerName);
  res.set(http::field::content_type, "application/json");
  res.keep_alive(false);
  res.body() = body;
  res.prepare_payload();
  beast::error_code ec;
  http::write(sock, res, ec);
}

std::string error_json(const std::string& message, const char* type, const char* code) {
  return fmt::format(R"({{"error":{{"message":"{}","type":"{}","param":null,"code":"{}"}}}})",
                     message, type, code);
}

class Responder final : public HttpResponder {
 public:
  Responder(tcp::socket& sock, bool keep_alive) : sock_(sock), keep_alive_(keep_alive) {}

  void respond(int status, std::string_view content_type, std::string body,
               std::initializer_list<std::pair<std::string_view, std::string_view>> extra)
      override {
    http::response<http::string_body> res{static_cast<http::status>(status), 11};
    res.set(http::field::server, kServerName);
    res.set(http::field::content_type, bsv(content_type));
    for (const auto& [k, v] : extra) res.set(bsv(k), bsv(v));
    res.keep_alive(keep_alive_);
    res.body() = std::move(body);
    res.prepare_payload();
    beast::error_code ec;
    http::write(sock_, res, ec);
    if (ec) keep_alive_ = false;
    done_ = true;
  }

  bool start_stream(int status, std::string_view content_type) override {
    http::response<http::empty_body> res{static_cast<http::status>(status), 11};
    res.set(http::field::server, kServerName);
    res.set(http::field::content_type, bsv(content_type));
    res.set(http::field::cache_control, "no-cache");
    res.keep_alive(keep_alive_);
    res.chunked(true);
    http::response_serializer<http::empty_body> sr{res};
    beast::error_code ec;
    http::write_header(sock_, sr, ec);
    streaming_ = true;
    done_ = true;
    return ok(ec);
  }

  bool write(std::string_view data) override {
    if (broken_) return false;
    beast::error_code ec;
    asio::write(sock_, http::make_chunk(asio::buffer(data.data(), data.size())), ec);
    return ok(ec);
  }

  void end_stream() override {
    if (broken_) return;
    beast::error_code ec;
    asio::write(sock_, http::make_chunk_last(), ec);
    ok(ec);
  }

  bool keep_alive() const { return keep_alive_ && !broken_; }
  bool done() const { return done_; }

 private:
  bool ok(const beast::error_code& ec) {
    if (ec) broken_ = true;
    return !broken_;
  }
  tcp::socket& sock_;
  bool keep_alive_;
  bool streaming_ = false, broken_ = false, done_ = false;
};

}  // namespace

HttpServer::HttpServer(const HttpOptions& opts, HttpHandler handler)
    : impl_(std::make_unique<Impl>()), opts_(opts), handler_(std::move(handler)) {
  beast::error_code ec;
  const asio::ip::address addr = asio::ip::make_address(opts.host, ec);
  SSD_CHECK(!ec, "--host '{}' is not an IP address ({})", opts.host, ec.message());
  const tcp::endpoint ep(addr, opts.port);
  impl_->acceptor.open(ep.protocol(), ec);
  if (!ec) impl_->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) impl_->acceptor.bind(ep, ec);
  if (!ec) impl_->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  SSD_CHECK(!ec, "cannot listen on {}:{}: {}", opts.host, opts.port, ec.message());
  port_ = impl_->acceptor.local_endpoint().port();
}

HttpServer::~HttpServer() { stop(); }

void HttpServer::start() {
  impl_->started = true;
  auto accept = std::make_shared<std::function<void()>>();
  *accept = [this, accept] {
    impl_->acceptor.async_accept([this, accept](beast::error_code ec, tcp::socket sock) {
      if (ec == asio::error::operation_aborted || !impl_->acceptor.is_open()) return;
      if (!ec) {
        std::unique_lock lk(impl_->mu);
        if (impl_->stopping ||
            static_cast<int64_t>(impl_->fds.size()) >= opts_.max_connections) {
          lk.unlock();
          write_simple(sock, http::status::service_unavailable,
                       error_json("too many open connections", "server_error", "overloaded"));
        } else {
          const int64_t id = impl_->next_id++;
          impl_->fds[id] = sock.native_handle();
          auto owned = std::make_shared<tcp::socket>(std::move(sock));
          std::thread([this, id, owned] { serve_connection(id, owned.get()); }).detach();
        }
      }
      (*accept)();
    });
  };
  asio::post(impl_->io, [accept] { (*accept)(); });
  impl_->accept_thread = std::thread([this] { impl_->io.run(); });
}

void HttpServer::serve_connection(int64_t id, void* socket) {
  tcp::socket& sock = *static_cast<tcp::socket*>(socket);
  // Idle keep-alive connections end after idle_timeout_s (a blocked read then fails).
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(opts_.idle_timeout_s);
  tv.tv_usec = static_cast<suseconds_t>((opts_.idle_timeout_s - double(tv.tv_sec)) * 1e6);
  ::setsockopt(sock.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  sock.set_option(tcp::no_delay(true));
  beast::flat_buffer buf;
  for (;;) {
    http::request_parser<http::string_body> parser;
    parser.header_limit(64 * 1024);
    parser.body_limit(static_cast<std::uint64_t>(opts_.max_body));
    beast::error_code ec;
    http::read_header(sock, buf, parser, ec);
    if (!ec && parser.get()[http::field::expect] == "100-continue") {
      // Content-Length over the limit: refuse before the client sends the body.
      const auto len = parser.content_length();
      if (len && *len > static_cast<std::uint64_t>(opts_.max_body)) {
        ec = http::error::body_limit;
      } else {
        http::response<http::empty_body> cont{http::status::continue_, 11};
        http::write(sock, cont, ec);
      }
    }
    if (!ec) http::read(sock, buf, parser, ec);
    if (ec == http::error::body_limit) {
      write_simple(sock, http::status::payload_too_large,
                   error_json(fmt::format("the request body exceeds --max-body ({} bytes)",
                                          opts_.max_body),
                              "invalid_request_error", "payload_too_large"));
      break;
    }
    if (ec == http::error::end_of_stream || ec == asio::error::eof ||
        ec == asio::error::connection_reset || ec == asio::error::would_block ||
        ec == asio::error::try_again || ec == asio::error::bad_descriptor ||
        ec == asio::error::shut_down || ec == asio::error::operation_aborted)
      break;
    if (ec) {
      write_simple(sock, http::status::bad_request,
                   error_json(fmt::format("malformed HTTP request: {}", ec.message()),
                              "invalid_request_error", "bad_request"));
      break;
    }
    {
      std::lock_guard lk(impl_->mu);
      impl_->busy[id] = true;
    }
    const auto& req = parser.get();
    HttpRequest r;
    r.method = std::string(req.method_string());
    const std::string_view target(req.target().data(), req.target().size());
    r.path = std::string(target.substr(0, target.find('?')));
    r.authorization = std::string(req[http::field::authorization]);
    r.body = req.body();
    Responder res(sock, req.keep_alive());
    try {
      handler_(r, res);
    } catch (const std::exception& e) {
      if (!res.done())
        res.respond(500, "application/json",
                    error_json("internal error", "server_error", "internal_error"), {});
    }
    if (!res.done())
      res.respond(500, "application/json",
                  error_json("no response", "server_error", "internal_error"), {});
    bool stopping = false;
    {
      std::lock_guard lk(impl_->mu);
      impl_->busy[id] = false;
      stopping = impl_->stopping;
    }
    if (!res.keep_alive() || stopping) break;
  }
  beast::error_code ec;
  sock.shutdown(tcp::socket::shutdown_both, ec);
  {
    std::lock_guard lk(impl_->mu);
    impl_->fds.erase(id);
    impl_->busy.erase(id);
    sock.close(ec);
  }
  impl_->cv.notify_all();
}

void HttpServer::stop() {
  if (!impl_ || !impl_->started) return;
  {
    std::lock_guard lk(impl_->mu);
    if (impl_->stopping) return;
    impl_->stopping = true;
  }
  asio::post(impl_->io, [this] {
    beast::error_code ec;
    impl_->acceptor.close(ec);
  });
  impl_->accept_thread.join();
  std::unique_lock lk(impl_->mu);
  // Idle connections are closed now (shutdown(2) unblocks their thread's read, and is safe from
  // another thread); a connection still answering finishes its response first (up to 30 s).
  for (const auto& [id, fd] : impl_->fds)
    if (!impl_->busy[id]) ::shutdown(fd, SHUT_RDWR);
  impl_->cv.wait_for(lk, std::chrono::seconds(30), [&] { return impl_->fds.empty(); });
  for (const auto& [id, fd] : impl_->fds) ::shutdown(fd, SHUT_RDWR);
  impl_->cv.wait_for(lk, std::chrono::seconds(5), [&] { return impl_->fds.empty(); });
}

}  // namespace ssd
