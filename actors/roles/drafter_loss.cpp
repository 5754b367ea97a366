// The leader's policy for a lost drafter rank and the liveness probe (see drafter_loss.h).
#include "actors/roles/drafter_loss.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <iterator>

#include "runtime/core/trace.h"

namespace ssd {

bool launcher_recovery_on() {
  const char* v = std::getenv("OMPI_MCA_orte_enable_recovery");
  if (!v) return false;
  std::string s(v);
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s == "1" || s == "true" || s == "yes" || s == "on";
}

bool continue_on_drafter_loss(const std::string& flag) {
  if (flag == "continue") return true;
  if (flag == "abort") return false;
  SSD_CHECK(flag == "auto", "--on-drafter-loss must be auto, abort or continue, not '{}'", flag);
  return launcher_recovery_on();
}

ProcessState local_process_state(int pid) {
  if (pid <= 0) return ProcessState::kUnknown;
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  if (!in) return ProcessState::kGone;
  const std::string stat((std::istreambuf_iterator<char>(in)), {});
  // "pid (comm) S ...": the state follows the last ')' (comm may hold ')' itself).
  const size_t close = stat.rfind(')');
  if (close == std::string::npos || close + 2 >= stat.size()) return ProcessState::kUnknown;
  switch (stat[close + 2]) {
    case 'Z':
    case 'X': return ProcessState::kGone;  // dead, not yet reaped by its launcher
    case 'T':
    case 't': return ProcessState::kStopped;
    default: return ProcessState::kRunning;
  }
}

RankLiveness::RankLiveness(const nlohmann::json& places) {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  for (const nlohmann::json& p : places) {
    const int rank = p.value("rank", -1);
    if (rank < 0) continue;
    if (static_cast<size_t>(rank) >= local_pid_.size()) local_pid_.resize(rank + 1, -1);
    if (p.value("host", std::string()) == host) local_pid_[rank] = p.value("pid", -1);
  }
}

ProcessState RankLiveness::state(int rank) const {
  if (rank < 0 || static_cast<size_t>(rank) >= local_pid_.size()) return ProcessState::kUnknown;
  return local_process_state(local_pid_[rank]);
}

std::string lookup_fallback(const std::string& kind) {
  return fmt::format("the leader's {} drafts", kind);
}

std::string DrafterLoss::line() const {
  return fmt::format("ssd: lost drafter rank {}: {}; the target finishes every sequence with {} "
                     "(output unchanged{})",
                     rank, cause, fallback, fallback == kPlainDecoding ? ", slower" : "");
}

nlohmann::json DrafterLoss::to_json() const {
  return {{"rank", rank}, {"round", round}, {"died", died}, {"cause", cause},
          {"fallback", fallback}};
}

void report_loss(const DrafterLoss& loss) {
  fmt::print(stderr, "{}\n", loss.line());
  std::fflush(stderr);
  trace::instant(fmt::format("drafter rank {} lost", loss.rank).c_str(), "fault", loss.round, -1);
}

namespace {

// The first of `ranks` whose process is in `state`, or -1.
int rank_in_state(const std::vector<int>& ranks, const DrafterLossPolicy& policy,
                  ProcessState state) {
  for (int r : ranks)
    if (policy.probe && policy.probe(r) == state) return r;
  return -1;
}

// What a rank other than the awaited one (ranks[0]) is to the wait.
std::string why(const std::vector<int>& ranks, int rank) {
  return rank == ranks.front() ? "" : "; the drafter lead's answers wait for its share";
}

DrafterLost died(const std::vector<int>& ranks, int gone, const std::string& what) {
  return DrafterLost(gone, true,
                     fmt::format("died (its process is gone{}) while {}", why(ranks, gone), what));
}

}  // namespace

DrafterLost lost_at_deadline(const std::vector<int>& ranks, double deadline_s,
                             const DrafterLossPolicy& policy, const std::string& what,
                             bool probe_gone) {
  if (probe_gone)
    if (const int gone = rank_in_state(ranks, policy, ProcessState::kGone); gone >= 0)
      return died(ranks, gone, what);
  const int stopped = rank_in_state(ranks, policy, ProcessState::kStopped);
  const int lost = stopped >= 0 ? stopped : ranks.front();
  return DrafterLost(lost, false,
                     fmt::format("deadline of {:g} s expired while {}{}", deadline_s, what,
                                 stopped >= 0
                                     ? fmt::format(" (its process is stopped{})", why(ranks, lost))
                                     : std::string()));
}

Envelope wait_for_drafter(Transport& world, int drafter, double deadline_s,
                          const DrafterLossPolicy& policy, const std::string& what) {
  using Clock = std::chrono::steady_clock;
  const auto total = std::chrono::milliseconds(static_cast<int64_t>(deadline_s * 1000));
  // The next frame before `until`, past heartbeats (a TransportTimeout at `until`).
  const auto next_frame = [&](Clock::time_point until) {
    for (;;) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now());
      Envelope env = world.recv(std::max(left, std::chrono::milliseconds(0)));
      if (env.kind != MsgKind::kHeartbeat) return env;
    }
  };
  // Abort policy: the caller's watchdog (armed for deadline_s, naming the wait) ends the job; the
  // receive's own deadline only backs it up, later, so the watchdog's line always wins the race.
  if (!policy.continue_on_loss)
    return next_frame(Clock::now() + 2 * total + std::chrono::seconds(5));
  const Clock::time_point end = Clock::now() + total;
  std::vector<int> ranks = {drafter};
  for (int r : policy.ranks)
    if (r != drafter) ranks.push_back(r);
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now());
    if (left.count() <= 0) break;
    try {
      return next_frame(Clock::now() + std::min(left, policy.slice));
    } catch (const TransportTimeout&) {
    }
    if (const int gone = rank_in_state(ranks, policy, ProcessState::kGone); gone >= 0)
      throw died(ranks, gone, what);
  }
  throw lost_at_deadline(ranks, deadline_s, policy, what, /*probe_gone=*/false);
}

}  // namespace ssd
