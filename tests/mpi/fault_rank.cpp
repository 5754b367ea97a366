// The program tests/mpi/fault_test.cpp launches under mpirun to see how a job ends when one rank
// fails. Usage: ssd_mpi_fault_rank MODE PID_DIR
// Every rank writes PID_DIR/<rank>.pid, meets the others at a barrier, then rank 1 fails by MODE
// while the others wait for a message that never comes (as a target leader waits for a
// speculation):
//   exit    rank 1 calls exit(3) without MPI_Finalize
//   exit0   rank 1 calls exit(0) without MPI_Finalize
//   kill    rank 1 is killed by SIGKILL
//   error   rank 1 throws; main catches it and ends the job with abort_job (the pattern the actors
//           use: one line naming the rank, MPI_Abort)
//   hang    rank 1 stops answering (sleeps forever); rank 0's watchdog (1 s) ends the job
// Rank 0 has a watchdog in every mode (30 s unless hang), so even an MPI that did not end the
// job by itself would end within a bound; the driver checks it ends much sooner. In the modes
// where rank 1 dies (exit, exit0, kill) the others wait outside MPI, so that mpirun's report of
// rank 1 is the only failure (see main).
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

#include "actors/transport/mpi_transport.h"
#include "actors/transport/mpi_world.h"
#include "actors/transport/watchdog.h"

namespace {

void fail_as_rank1(const std::string& mode) {
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  std::fprintf(stderr, "fault_rank: rank 1 fails (%s)\n", mode.c_str());
  std::fflush(stderr);
  if (mode == "exit") std::exit(3);
  if (mode == "exit0") std::exit(0);
  if (mode == "kill") std::raise(SIGKILL);
  if (mode == "error") throw ssd::Error("draft model failed: out of KV cache pages");
  if (mode == "hang")
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
  throw ssd::Error("unknown mode " + mode);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s exit|exit0|kill|error|hang PID_DIR\n", argv[0]);
    return 2;
  }
  const std::string mode = argv[1];
  ssd::MpiSession session(&argc, &argv);
  ssd::MpiWorld world(1);
  const ssd::RankLayout& layout = world.layout();
  std::ofstream(std::string(argv[2]) + "/" + std::to_string(layout.rank) + ".pid") << getpid();
  ssd::MpiTransport link(world.world());
  MPI_Barrier(world.world().get());
  try {
    if (layout.rank == 1) fail_as_rank1(mode);
    std::unique_ptr<ssd::Watchdog> dog;
    if (layout.rank == 0) {
      dog = std::make_unique<ssd::Watchdog>(0, layout.role());
      dog->arm("waiting for the speculation of round 3", mode == "hang" ? 1.0 : 30.0);
    }
    if (mode == "exit" || mode == "exit0" || mode == "kill") {
      // These modes test what mpirun does when a rank dies. A rank polling MPI here could notice
      // the dead peer first (its TCP connection closes; the error returns, and this rank's own
      // MPI_Abort(1) races mpirun's report of rank 1's status, which made the exit code 1
      // instead of 3 now and then). Waiting outside MPI leaves rank 1's failure the only one.
      for (;;) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    link.recv(std::chrono::seconds(60));
    std::fprintf(stderr, "fault_rank: rank %d got a message it never should\n", layout.rank);
    return 1;
  } catch (const std::exception& e) {
    ssd::abort_job(1, "rank " + std::to_string(layout.rank) + " (" +
                          std::string(ssd::role_name(layout.role())) + ") failed: " + e.what());
  }
}
