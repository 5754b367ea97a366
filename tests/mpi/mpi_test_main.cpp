// main() of the GoogleTest executables run under mpirun: every rank runs every test (the tests
// are collective), rank 0 prints the usual report, the other ranks print only their failures
// (prefixed with their rank), and all ranks agree on the exit status (the worst rank's), so
// mpirun and ctest see one verdict. Without mpirun the same binary runs as a world of one.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>

#include "actors/transport/mpi_world.h"

namespace {

// Failure lines of a non-zero rank (the default printer is removed there).
class RankFailurePrinter : public testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const testing::TestPartResult& r) override {
    if (!r.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n", rank_,
                 r.file_name() ? r.file_name() : "?", r.line_number(), r.message());
  }
  void OnTestEnd(const testing::TestInfo& info) override {
    if (info.result()->Failed())
      std::fprintf(stderr, "[rank %d] FAILED %s.%s\n", rank_, info.test_suite_name(), info.name());
  }

 private:
  int rank_;
};

}  // namespace

int main(int argc, char** argv) {
  ssd::MpiSession session(&argc, &argv);
  testing::InitGoogleTest(&argc, argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (rank != 0) {
    testing::TestEventListeners& listeners = testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new RankFailurePrinter(rank));
  }
  const int mine = RUN_ALL_TESTS();
  int worst = 0;
  MPI_Allreduce(&mine, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0)
    std::printf("[mpi] %d rank%s: %s\n", size, size == 1 ? "" : "s",
                worst ? "FAILED on at least one rank (see [rank N] lines)"
                      : "passed on every rank");
  return worst;
}
