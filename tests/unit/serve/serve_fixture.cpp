#include "tests/unit/serve/serve_fixture.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <stdexcept>
#include <thread>

#include "tests/support/run_command.h"

namespace ssd::test {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

HttpReply http_call(int port, const std::string& method, const std::string& path,
                    const std::string& body,
                    const std::vector<std::pair<std::string, std::string>>& headers,
                    std::chrono::seconds timeout) {
  asio::io_context io;
  tcp::socket sock(io);
  sock.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), static_cast<uint16_t>(port)));
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(timeout.count());
  ::setsockopt(sock.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ::setsockopt(sock.native_handle(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  http::request<http::string_body> req{http::string_to_verb(method), path, 11};
  req.set(http::field::host, "127.0.0.1");
  req.set(http::field::content_type, "application/json");
  for (const auto& [k, v] : headers) req.set(k, v);
  req.body() = body;
  req.prepare_payload();
  beast::error_code ec;
  http::write(sock, req, ec);
  // A server may answer (413) before reading the whole body and close: still read its answer.
  beast::flat_buffer buf;
  http::response_parser<http::string_body> parser;
  parser.body_limit(1ull << 30);
  http::read(sock, buf, parser, ec);
  if (ec && ec != http::error::end_of_stream)
    throw std::runtime_error("HTTP " + method + " " + path + ": " + ec.message());
  HttpReply r;
  const auto& res = parser.get();
  r.status = static_cast<int>(res.result_int());
  r.body = res.body();
  for (const auto& f : res) {
    std::string name(f.name_string());
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    r.headers[name] = std::string(f.value());
  }
  return r;
}

std::vector<std::string> sse_events(const std::string& body) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at < body.size()) {
    const size_t end = body.find("\n\n", at);
    if (end == std::string::npos) {
      ADD_FAILURE() << "an SSE event does not end with a blank line: " << body.substr(at);
      break;
    }
    const std::string ev = body.substr(at, end - at);
    at = end + 2;
    if (ev.starts_with(":")) continue;  // a comment (keep-alive)
    if (!ev.starts_with("data: ") || ev.find('\n') != std::string::npos) {
      ADD_FAILURE() << "malformed SSE event: " << ev;
      continue;
    }
    out.push_back(ev.substr(6));
  }
  return out;
}

double metric(const std::string& text, const std::string& name, const std::string& label) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("#") || !line.starts_with(name + "{")) continue;
    const size_t close = line.find('}');
    if (!label.empty() && line.substr(0, close).find(label) == std::string::npos) continue;
    return std::stod(line.substr(close + 2));
  }
  return -1;
}

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

ServeProcess::ServeProcess(const std::string& args, const std::string& launcher) {
  char tmpl[] = "/tmp/ssd_serve_test_XXXXXX";
  const char* d = ::mkdtemp(tmpl);
  if (!d) throw std::runtime_error("mkdtemp failed");
  dir_ = d;
  const std::string port_file = dir_ + "/port";
  std::string cmd = "exec " + (launcher.empty() ? "" : launcher + " ") +
                    shell_quote(project_binary("ssd")) + " serve " + args +
                    " --port 0 --port-file " + shell_quote(port_file) + " 2> " +
                    shell_quote(dir_ + "/stderr") + " > " + shell_quote(dir_ + "/stdout") +
                    " < /dev/null";
  pid_ = ::fork();
  if (pid_ == 0) {
    ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  const std::regex pid_re("pid ([0-9]+)\\)");
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      throw std::runtime_error("ssd serve exited at start-up:\n" + log());
    }
    std::smatch m;
    const std::string err = log();
    if (std::filesystem::exists(port_file) && std::regex_search(err, m, pid_re)) {
      const std::string p = slurp(port_file);
      if (!p.empty() && p.back() == '\n') {
        port_ = std::stoi(p);
        server_ = static_cast<pid_t>(std::stol(m[1].str()));
        return;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  throw std::runtime_error("ssd serve did not listen within 120 s:\n" + log());
}

ServeProcess::~ServeProcess() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    if (server_ > 0 && server_ != pid_) ::kill(server_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

void ServeProcess::signal_term() { ::kill(server_, SIGTERM); }

int ServeProcess::wait_exit(std::chrono::seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return -1;
}

int ServeProcess::terminate(std::chrono::seconds timeout) {
  signal_term();
  return wait_exit(timeout);
}

std::string ServeProcess::log() const { return slurp(dir_ + "/stderr"); }

}  // namespace ssd::test
