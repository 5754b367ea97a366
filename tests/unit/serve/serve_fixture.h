// What the server tests share: a `ssd serve` process on 127.0.0.1 with an ephemeral port (started
// on a tiny model the test writes, stopped with SIGTERM; every wait bounded in time), and a small
// blocking HTTP client (Boost.Beast) with a deadline on every call.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <string>
#include <vector>

namespace ssd::test {

struct HttpReply {
  int status = 0;
  std::string body;
  std::map<std::string, std::string> headers;  // lower-case names
};

// One request on a fresh connection; the body is sent as given (Content-Type: application/json).
// Throws std::runtime_error when the server cannot be reached or does not answer within
// `timeout`.
HttpReply http_call(int port, const std::string& method, const std::string& path,
                    const std::string& body = {},
                    const std::vector<std::pair<std::string, std::string>>& headers = {},
                    std::chrono::seconds timeout = std::chrono::seconds(120));

// The SSE events of a streamed body: the payload after "data: " of each event, in order.
// Comment lines (": ...") are skipped. Fails the test (ADD_FAILURE) on a malformed frame.
std::vector<std::string> sse_events(const std::string& body);

// A value read from Prometheus text: the sample `name{...labels...}` whose label set contains
// `label` (e.g. "finished_reason=\"abort\""), or -1 when absent.
double metric(const std::string& text, const std::string& name, const std::string& label = {});

class ServeProcess {
 public:
  // Starts `ssd serve <args> --port 0 --port-file ...` (or `<launcher> ssd serve ...` when
  // launcher is non-empty, e.g. mpirun) and waits (up to 120 s) until it listens.
  explicit ServeProcess(const std::string& args, const std::string& launcher = {});
  ~ServeProcess();  // SIGKILL if still running
  ServeProcess(const ServeProcess&) = delete;
  ServeProcess& operator=(const ServeProcess&) = delete;

  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  // SIGTERM to the server (rank 0); returns its exit code (waits up to `timeout`; -1 on timeout,
  // after which it is killed).
  int terminate(std::chrono::seconds timeout = std::chrono::seconds(120));
  // SIGTERM without waiting; wait_exit() collects the exit code later.
  void signal_term();
  int wait_exit(std::chrono::seconds timeout = std::chrono::seconds(120));
  std::string log() const;  // the server's stderr so far

 private:
  pid_t pid_ = -1;       // the process started (the launcher's, under mpirun)
  pid_t server_ = -1;    // rank 0's pid, from its start-up line
  int port_ = 0;
  std::string dir_;
};

}  // namespace ssd::test
