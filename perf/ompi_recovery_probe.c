/* What Open MPI does to the survivors when one rank dies or hangs, with and without its recovery
 * mode: the measurements behind docs/faults.md, "Recovery". Not part of the build:
 *
 *   mpicc -O1 -o /tmp/probe perf/ompi_recovery_probe.c
 *   mpirun --allow-run-as-root --oversubscribe --bind-to none --mca orte_enable_recovery 1 \
 *       [--mca btl tcp,self] -x PROBE_HOW=kill|stop -n 3 /tmp/probe
 *
 * Ranks 0..n-2 play the TP group (their own communicator), rank n-1 the drafter: it sends one
 * message, then SIGKILLs or SIGSTOPs itself. Rank 0 then polls MPI_Improbe for 4 s (what the
 * leader's wait does), sends to the dead rank, the group runs an all-reduce, and every survivor
 * times its MPI_Finalize. Every communicator has MPI_ERRORS_RETURN, so an error would show as a
 * return code. With PROBE_HOW=stop MPI_Finalize was seen to block: stop the job by hand. */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char** argv) {
  int provided, rank, size, x = 1;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const char* how = getenv("PROBE_HOW") ? getenv("PROBE_HOW") : "kill";
  MPI_Comm world, tp;
  MPI_Comm_dup(MPI_COMM_WORLD, &world);
  MPI_Comm_set_errhandler(world, MPI_ERRORS_RETURN);
  MPI_Comm_split(world, rank < size - 1 ? 0 : MPI_UNDEFINED, rank, &tp);
  if (tp != MPI_COMM_NULL) MPI_Comm_set_errhandler(tp, MPI_ERRORS_RETURN);
  MPI_Barrier(world);
  if (rank == size - 1) {
    MPI_Send(&x, 1, MPI_INT, 0, 5, world);
    sleep(1);
    raise(strcmp(how, "stop") == 0 ? SIGSTOP : SIGKILL);
  }
  if (rank == 0) {
    MPI_Recv(&x, 1, MPI_INT, size - 1, 5, world, MPI_STATUS_IGNORE);
    int flag = 0, rc = MPI_SUCCESS, done = 0;
    MPI_Message msg;
    MPI_Status st;
    double t0 = now();
    while (now() - t0 < 4) {
      rc = MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, world, &flag, &msg, &st);
      if (rc != MPI_SUCCESS || flag) break;
      usleep(1000);
    }
    printf("rank 0: polled %.2f s for the lost rank: rc %d, message %d\n", now() - t0, rc, flag);
    MPI_Request req;
    rc = MPI_Isend(&x, 1, MPI_INT, size - 1, 6, world, &req);
    for (t0 = now(); now() - t0 < 2 && rc == MPI_SUCCESS && !done; usleep(1000))
      rc = MPI_Test(&req, &done, MPI_STATUS_IGNORE);
    printf("rank 0: send to the lost rank: rc %d, complete %d\n", rc, done);
    fflush(stdout);
  }
  if (tp != MPI_COMM_NULL) {
    int sum = 0;
    const double t0 = now();
    const int rc = MPI_Allreduce(&x, &sum, 1, MPI_INT, MPI_SUM, tp);
    printf("rank %d: TP all-reduce rc %d, sum %d (want %d), %.3f s\n", rank, rc, sum, size - 1,
           now() - t0);
    fflush(stdout);
  }
  const double t0 = now();
  MPI_Finalize();
  printf("rank %d: MPI_Finalize returned after %.2f s\n", rank, now() - t0);
  return 0;
}
