#include "actors/roles/stranded_rank.h"

#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>

#include "actors/roles/drafter_loss.h"

namespace ssd {
namespace {

// The parent pid of process `pid` (Linux /proc/PID/stat, field 4), or -1 when unknown.
pid_t parent_of(pid_t pid) {
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  if (!in) return -1;
  const std::string stat((std::istreambuf_iterator<char>(in)), {});
  // "pid (comm) S ppid ...": the fields after the last ')' (comm may hold ')' itself).
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return -1;
  char state = 0;
  long ppid = -1;
  if (std::sscanf(stat.c_str() + close + 1, " %c %ld", &state, &ppid) != 2) return -1;
  return static_cast<pid_t>(ppid);
}

}  // namespace

bool end_stranded_rank(const nlohmann::json& places, int rank, pid_t launcher) {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  pid_t pid = -1;
  for (const nlohmann::json& p : places)
    if (p.value("rank", -1) == rank && p.value("host", std::string()) == host)
      pid = p.value("pid", -1);
  if (pid <= 0 || pid == getpid()) return false;
  const ProcessState state = local_process_state(pid);
  if (state == ProcessState::kGone || state == ProcessState::kUnknown) return false;
  if (parent_of(pid) != launcher) return false;
  if (kill(pid, SIGKILL) != 0) return false;
  for (int i = 0; i < 200 && local_process_state(pid) != ProcessState::kGone; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return true;
}

}  // namespace ssd
