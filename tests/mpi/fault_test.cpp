// How a job ends when a rank fails: launches mpirun on ssd_mpi_fault_rank
// (3 ranks; rank 1 fails, ranks 0 and 2 wait on it) and checks that the job ends with a non-zero
// status within a bound, says why, and leaves no rank process behind.
//
// What Open MPI 4.1 was seen to do (and these tests pin down): when a rank exits non-zero, exits
// 0 without MPI_Finalize, is killed by a signal, or calls MPI_Abort, mpirun kills the other ranks
// and exits non-zero within about a second of the failure (its status: the rank's exit code, 1,
// 128 + signal, or the MPI_Abort code). A rank that hangs is invisible to mpirun: only a watchdog
// on a waiting rank (actors/transport/watchdog.h) ends that job.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>

#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"

namespace ssd {
namespace {

struct JobEnd {
  test::CommandResult result;
  double seconds = 0;
  std::vector<int> pids;  // of every rank that started
};

JobEnd run_job(const std::string& mode) {
  test::TempDir dir;
  std::string cmd = std::string(SSD_MPIEXEC) + " -n 3 --oversubscribe --bind-to none ";
  if (geteuid() == 0) cmd += "--allow-run-as-root ";
  cmd += test::shell_quote(SSD_FAULT_RANK) + " " + mode + " " + test::shell_quote(dir.path());
  JobEnd end;
  const auto t0 = std::chrono::steady_clock::now();
  end.result = test::run_command(cmd);
  end.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (int r = 0; r < 3; ++r) {
    std::ifstream in(dir.file(std::to_string(r) + ".pid"));
    int pid = 0;
    if (in >> pid) end.pids.push_back(pid);
  }
  return end;
}

// Running (not gone, not a zombie). Ranks that mpirun killed can linger as zombies when the
// process that adopts them does not reap (PID 1 of a container often does not): they no longer
// run, so they are not orphans.
bool alive(int pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  const size_t paren = line.rfind(')');
  const char state = paren != std::string::npos && paren + 2 < line.size() ? line[paren + 2] : '?';
  return state != 'Z' && state != 'X';
}

// Bound on the whole job: ~1.5 s of mpirun start-up (3 ranks on 2 cores), 0.2 s before the
// failure, about 1 s for mpirun to notice and tear down (or the 1 s watchdog), and generous
// slack for a loaded machine. A job that is not ended runs into the ranks' 30 s watchdog.
constexpr double kBoundSeconds = 20;

void expect_job_ended(const JobEnd& end, const std::string& mode) {
  SCOPED_TRACE("mode " + mode + "\nstderr:\n" + end.result.err);
  EXPECT_NE(end.result.exit_code, 0);
  EXPECT_LT(end.seconds, kBoundSeconds);
  EXPECT_EQ(end.pids.size(), 3u) << "not every rank started";
  // mpirun may return while the ranks it killed are still being torn down by the kernel: give
  // each up to 5 s to be gone before calling it an orphan.
  for (int pid : end.pids) {
    for (int i = 0; i < 100 && alive(pid); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_FALSE(alive(pid)) << "rank process " << pid << " outlived the job by 5 s";
  }
}

TEST(Fault, RankExitingWithAnErrorEndsTheJob) {
  const JobEnd end = run_job("exit");
  expect_job_ended(end, "exit");
  EXPECT_EQ(end.result.exit_code, 3);  // mpirun passes the failed rank's status on
}

TEST(Fault, RankExitingWithoutFinalizeEndsTheJob) {
  const JobEnd end = run_job("exit0");
  expect_job_ended(end, "exit0");
  EXPECT_NE(end.result.err.find("exiting improperly"), std::string::npos) << end.result.err;
}

TEST(Fault, KilledRankEndsTheJob) {
  const JobEnd end = run_job("kill");
  expect_job_ended(end, "kill");
  EXPECT_NE(end.result.err.find("signal 9"), std::string::npos) << end.result.err;
}

TEST(Fault, RankErrorIsNamedAndEndsTheJob) {
  const JobEnd end = run_job("error");
  expect_job_ended(end, "error");
  EXPECT_NE(end.result.err.find("rank 1 (drafter) failed: draft model failed: out of KV cache "
                                "pages"),
            std::string::npos)
      << end.result.err;
}

TEST(Fault, HungRankIsCaughtByTheWatchdog) {
  const JobEnd end = run_job("hang");
  expect_job_ended(end, "hang");
  EXPECT_NE(end.result.err.find("rank 0 (target) timed out after 1 s while waiting for the "
                                "speculation of round 3"),
            std::string::npos)
      << end.result.err;
  EXPECT_EQ(end.result.exit_code, 70);  // Watchdog::kExitCode through MPI_Abort
}

}  // namespace
}  // namespace ssd
