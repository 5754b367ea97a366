// The fault matrix under mpirun: a real SSD job (4 ranks: target TP 2 on ranks 0-1, the drafter
// lead on rank 2, a secondary drafter on rank 3; a tiny random model written here as target and
// drafter, so a cell takes seconds) in which one rank fails through SSD_FAULT
// (actors/roles/fault_injection.h), for every role x fault x phase:
//   roles   leader (rank 0), worker (rank 1), drafter (the drafter lead, rank 2),
//           secondary (rank 3)
//   faults  kill (SIGKILL), stop (SIGSTOP: a hang), error (a thrown std::runtime_error),
//           corrupt (a frame with a bad magic sent to a peer)
//   phases  startup (before the handshake), prefill, round (round 1), prespec (round 1)
// Every cell must: end within the watchdog deadline + 10 s of the fault (timed from the steady
// clock the fault's own line prints), with a non-zero status; say what happened in one line (the
// line each fault leaves is below, in expected_lines(): mpirun's for a killed rank, a watchdog's for
// a hung one, the failing rank's own for an error, the receiver's naming the sender for a
// corrupted frame); and leave the tokens already streamed
// intact, a prefix of the target's AR output (non-empty once the job is past its first round); and
// leave no rank process running. One test per role (ctest: mpi.fault_matrix_<role>, label
// fault_matrix); each prints a table row per cell: role, fault, phase, exit status, seconds from
// the fault to the job's end, the job's seconds in all, and the line.
//
// Not applicable: the worker's prespec cell (the only work a TP worker does while the drafter
// pre-speculates is the verification forward, which is its round cell).
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "actors/roles/fault_injection.h"
#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tiny_model.h"

namespace ssd {
namespace {

// 3 s and 5 s were seen to time out the start-up link probe on the shared 2-core machine under
// load (4 ranks, load average 6-7).
constexpr double kWatchdogS = 8;
constexpr double kBoundAfterFaultS = kWatchdogS + 10;
constexpr int kNewTokens = 40;
constexpr int kRanks = 4;  // TP 2 + 2 drafter ranks
const char* const kPrompt = "one two three four five six seven";

double steady_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string ssd_bin() { return test::project_binary("ssd"); }

// The tiny model, written once per test process, and the target's AR text for the prompt.
struct Setup {
  test::TempDir dir;
  std::string model;
  std::string ar_text;
};

const Setup& setup() {
  static Setup* s = [] {
    auto* s = new Setup;
    s->model = test::write_tiny_gguf(test::tiny_spec(Arch::Llama, DType::F32),
                                     s->dir.file("fault_matrix_tiny.gguf"));
    const test::CommandResult ar = test::run_command(
        test::shell_quote(ssd_bin()) + " generate -m " + test::shell_quote(s->model) + " -p " +
        test::shell_quote(kPrompt) + " -n " + std::to_string(kNewTokens) +
        " --ignore-eos --threads 1 --mode ar");
    if (ar.exit_code != 0) ADD_FAILURE() << "the AR reference failed:\n" << ar.err;
    s->ar_text = ar.out;
    return s;
  }();
  return *s;
}

int rank_of(FaultRole role) { return static_cast<int>(role); }  // leader 0 .. secondary 3

struct Cell {
  FaultRole role;
  FaultKind kind;
  FaultPhase phase;
};

std::string cell_env(const Cell& c) {
  std::string v = fmt::format("{}:{}:{}", fault_role_name(c.role), fault_kind_name(c.kind),
                              fault_phase_name(c.phase));
  if (c.phase == FaultPhase::kRound || c.phase == FaultPhase::kPrespec) v += ":round=1";
  return v;
}

// The lines a fault may leave on the job's stderr (substrings; one of them must be there).
// A stopped leader outside the start-up is found by the drafter lead's heartbeat watch (two
// deadlines, heartbeat.h), the one detector that does not depend on the stopped process. Its own
// watchdog line ("rank 0 (target) timed out after 8 s while verifying round 1") appears only when
// mpirun's SIGCONT, sent before the SIGTERM that ends the job, lets its watchdog thread print
// first: a race it wins most of the time, not always (seen once in 20 passes).
std::vector<std::string> expected_lines(const Cell& c) {
  const int r = rank_of(c.role);
  switch (c.kind) {
    case FaultKind::kKill: return {fmt::format("process rank {} with PID", r)};  // mpirun's
    case FaultKind::kStop: {
      std::vector<std::string> lines = {fmt::format("timed out after {:g} s while", kWatchdogS)};
      if (c.role == FaultRole::kLeader && c.phase != FaultPhase::kStartup) {
        lines.push_back(fmt::format(
            "timed out after {:g} s while waiting for a heartbeat from the target leader (rank 0)",
            2 * kWatchdogS));
      }
      return lines;
    }
    case FaultKind::kError: return {"error: injected error"};  // from the rank itself
    case FaultKind::kCorrupt: return {fmt::format("corrupted Error from rank {}", r)};
  }
  return {};
}

std::string line_with(const std::string& text, const std::string& needle) {
  const size_t at = text.find(needle);
  if (at == std::string::npos) return "";
  const size_t begin = text.rfind('\n', at);
  const size_t end = text.find('\n', at);
  return text.substr(begin == std::string::npos ? 0 : begin + 1,
                     end == std::string::npos ? std::string::npos
                                              : end - (begin == std::string::npos ? 0 : begin + 1));
}

// When the fault fired, from its own line ("... (steady clock T s)").
std::optional<double> fault_time(const std::string& err) {
  const std::string line = line_with(err, "ssd: fault injection:");
  const size_t at = line.rfind("(steady clock ");
  if (at == std::string::npos) return std::nullopt;
  return std::stod(line.substr(at + 14));
}

// Processes (not zombies) whose command line names `needle` (this test's model path).
std::vector<int> running_with(const std::string& needle) {
  std::vector<int> pids;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream cmd(e.path() / "cmdline");
    std::string args((std::istreambuf_iterator<char>(cmd)), std::istreambuf_iterator<char>());
    if (args.find(needle) == std::string::npos || std::stoi(name) == getpid()) continue;
    std::ifstream stat(e.path() / "stat");
    std::string st;
    std::getline(stat, st);
    const size_t paren = st.rfind(')');
    const char state = paren != std::string::npos && paren + 2 < st.size() ? st[paren + 2] : '?';
    if (state != 'Z' && state != 'X') pids.push_back(std::stoi(name));
  }
  return pids;
}

void run_cell(const Cell& c) {
  const Setup& s = setup();
  std::string cmd = "SSD_FAULT=" + cell_env(c) + " timeout -s KILL 90 " + SSD_MPIEXEC + " -n " +
                    std::to_string(kRanks) + " --oversubscribe --bind-to none -x SSD_FAULT ";
  if (geteuid() == 0) cmd += "--allow-run-as-root ";
  cmd += test::shell_quote(ssd_bin()) + " generate -m " + test::shell_quote(s.model) + " -p " +
         test::shell_quote(kPrompt) + " -n " + std::to_string(kNewTokens) +
         " --ignore-eos --threads 1 --mode ssd --drafter model:" + test::shell_quote(s.model) +
         " --k 4 --tp 2 --watchdog-s " + fmt::format("{:g}", kWatchdogS);
  // A job that times out before its fault point (a watchdog firing in start-up on a machine too
  // loaded for the deadline) did not test the cell: it is run again, at most twice, and says so.
  double t0 = 0, t_end = 0;
  test::CommandResult r;
  std::optional<double> t_fault;
  for (int attempt = 0; attempt < 3; ++attempt) {
    t0 = steady_now();
    r = test::run_command(cmd);
    t_end = steady_now();
    t_fault = fault_time(r.err);
    if (t_fault || r.err.find("timed out after") == std::string::npos) break;
    std::printf("| (retry: a watchdog fired before the fault point: %s)\n",
                line_with(r.err, "timed out after").c_str());
  }
  const std::vector<std::string> wants = expected_lines(c);
  std::string want = wants.front();  // the first of them on stderr, or the main one
  for (const std::string& w : wants) {
    if (r.err.find(w) != std::string::npos) {
      want = w;
      break;
    }
  }
  std::string line = line_with(r.err, want);
  if (c.kind == FaultKind::kKill) line = line_with(r.err, "signal 9");
  const double after = t_fault ? t_end - *t_fault : -1;
  std::printf("| %-9s | %-7s | %-7s | %4d | %6.1f | %6.1f | %s\n",
              std::string(fault_role_name(c.role)).c_str(),
              std::string(fault_kind_name(c.kind)).c_str(),
              std::string(fault_phase_name(c.phase)).c_str(), r.exit_code, after, t_end - t0,
              line.empty() ? "<none>" : line.c_str());
  std::fflush(stdout);

  SCOPED_TRACE("cell SSD_FAULT=" + cell_env(c) + "\nstderr:\n" + r.err);
  ASSERT_TRUE(t_fault.has_value()) << "the fault point was never reached";
  EXPECT_NE(r.exit_code, 0);
  EXPECT_LT(after, kBoundAfterFaultS) << "the job ended " << after << " s after the fault";
  EXPECT_NE(r.err.find(want), std::string::npos) << "no line saying: " << want;
  if (c.kind == FaultKind::kKill) {
    EXPECT_NE(r.err.find("signal 9"), std::string::npos) << "mpirun did not name the signal";
  }
  if (c.kind == FaultKind::kError) {  // the line names the failing rank
    EXPECT_NE(line.find(fmt::format("rank {} (", rank_of(c.role))), std::string::npos) << line;
  }
  // What was streamed is the target's own output, cut short.
  EXPECT_EQ(r.out, s.ar_text.substr(0, r.out.size())) << "streamed text is not a prefix of AR";
  if (c.phase == FaultPhase::kRound || c.phase == FaultPhase::kPrespec) {
    EXPECT_FALSE(r.out.empty()) << "nothing was streamed before a fault in round 1";
  }
  // No rank outlives the job (mpirun may still be tearing killed ranks down: 5 s of grace).
  std::vector<int> left = running_with(s.model);
  for (int i = 0; i < 100 && !left.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    left = running_with(s.model);
  }
  EXPECT_TRUE(left.empty()) << left.size() << " rank process(es) outlived the job by 5 s";
  for (int pid : left) kill(pid, SIGKILL);
}

void run_role(FaultRole role) {
  std::printf("| role      | fault   | phase   | exit | after fault s | total s | line\n");
  for (FaultKind kind : {FaultKind::kKill, FaultKind::kStop, FaultKind::kError,
                         FaultKind::kCorrupt})
    for (FaultPhase phase : {FaultPhase::kStartup, FaultPhase::kPrefill, FaultPhase::kRound,
                             FaultPhase::kPrespec}) {
      if (role == FaultRole::kWorker && phase == FaultPhase::kPrespec) {
        std::printf("| worker    | %-7s | prespec | n/a: a TP worker's work during pre-speculation "
                    "is the verification forward (its round cell)\n",
                    std::string(fault_kind_name(kind)).c_str());
        continue;
      }
      run_cell({role, kind, phase});
    }
}

TEST(FaultMatrix, Leader) { run_role(FaultRole::kLeader); }
TEST(FaultMatrix, Worker) { run_role(FaultRole::kWorker); }
TEST(FaultMatrix, DrafterLead) { run_role(FaultRole::kDrafterLead); }
TEST(FaultMatrix, SecondaryDrafter) { run_role(FaultRole::kSecondary); }

// The injection hook's parser: what the cells rely on, and a clear error for a malformed value.
TEST(FaultPlanParse, ValidValues) {
  EXPECT_FALSE(parse_fault_plan("").active);
  const FaultPlan p = parse_fault_plan("secondary:corrupt:prespec:round=3");
  EXPECT_TRUE(p.active);
  EXPECT_EQ(p.role, FaultRole::kSecondary);
  EXPECT_EQ(p.kind, FaultKind::kCorrupt);
  EXPECT_EQ(p.phase, FaultPhase::kPrespec);
  EXPECT_EQ(p.round, 3);
  EXPECT_EQ(parse_fault_plan("leader:kill:startup").round, 1);
  EXPECT_EQ(parse_fault_plan("drafter:stop:init").phase, FaultPhase::kInit);
  EXPECT_EQ(fault_phase_name(FaultPhase::kInit), "init");
}

TEST(FaultPlanParse, MalformedValuesAreNamed) {
  auto message = [](const char* v) {
    try {
      parse_fault_plan(v);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("<accepted>");
  };
  EXPECT_NE(message("boss:kill:startup").find("unknown role 'boss'"), std::string::npos);
  EXPECT_NE(message("leader:nuke:startup").find("unknown fault 'nuke'"), std::string::npos);
  EXPECT_NE(message("leader:kill:later").find("unknown phase 'later'"), std::string::npos);
  EXPECT_NE(message("leader:kill").find("2 parts"), std::string::npos);
  EXPECT_NE(message("leader:kill:round:round=x").find("round 'x'"), std::string::npos);
  EXPECT_NE(message("leader:kill:round:turn=1").find("is not round=N"), std::string::npos);
  EXPECT_NE(message("leader:kill:startup:round=1").find("round and prespec phases only"),
            std::string::npos);
  EXPECT_NE(message("drafter:stop:init:round=1").find("round and prespec phases only"),
            std::string::npos);
}

}  // namespace
}  // namespace ssd
