// MPI start-up and the communicators of a job, created once and owned in one place.
//
//   MpiSession  RAII MPI_Init_thread(MPI_THREAD_MULTIPLE) / MPI_Finalize. The actor loop polls
//               on the main thread while compute (and its sends) runs on another, so anything
//               less than MPI_THREAD_MULTIPLE is refused with a clear error. Works without mpirun
//               (Open MPI's singleton start: a world of 1). MPI_Init waits for every rank of the
//               job, and a rank stopped or stuck before it would hold the others there for good:
//               with a deadline, a rank whose MPI_Init has not returned by then says so on
//               stderr and exits with status 1, so that mpirun ends the job.
//   MpiComm     owner of one MPI_Comm (non-copyable, movable; freed on destruction) with
//               MPI_ERRORS_RETURN set, so failures surface through SSD_MPI_CHECK as ssd::Error.
//   MpiWorld    the layout (rank_layout.h) and the communicators split from it once:
//                 world()     every rank (the leader <-> drafter link and the handshake),
//                 tp()        ranks 0..T-1 (the target's collectives); only on target ranks,
//                 drafters()  ranks T..N-1 (drafter <-> drafter); only on drafter ranks.
//
// Destruction order: transports and collectives built on an MpiWorld's communicators must be
// destroyed before it, and the MpiWorld before the MpiSession.
#pragma once

#include <mpi.h>

#include <functional>

#include <memory>
#include <string_view>

#include "actors/transport/rank_layout.h"

namespace ssd {

class MpiSession {
 public:
  // init_deadline_s > 0: the seconds MPI_Init may take (see above); 0: no deadline.
  MpiSession(int* argc, char*** argv, double init_deadline_s = 0);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  // True when this process was started by mpirun/mpiexec/srun (their environment variables).
  static bool launched_by_launcher();
  // This process's rank and the job's size as the launcher's environment gives them, before
  // MPI_Init; -1 when it does not say.
  static int launcher_rank();
  static int launcher_size();
  static bool initialized();  // MPI_Init has run and MPI_Finalize has not

 private:
  bool owns_ = false;  // false when MPI was already initialised by someone else
};

class MpiComm {
 public:
  MpiComm() = default;  // null: this rank is not in the group
  MpiComm(const MpiComm&) = delete;
  MpiComm& operator=(const MpiComm&) = delete;
  MpiComm(MpiComm&& o) noexcept;
  MpiComm& operator=(MpiComm&& o) noexcept;
  ~MpiComm();

  // A private duplicate of `comm` (collective over comm), with MPI_ERRORS_RETURN.
  static MpiComm dup(MPI_Comm comm);
  // MPI_Comm_split of `comm` (collective); color MPI_UNDEFINED gives a null MpiComm.
  static MpiComm split(MPI_Comm comm, int color, int key);

  bool null() const { return comm_ == MPI_COMM_NULL; }
  MPI_Comm get() const { return comm_; }
  int rank() const;
  int size() const;

 private:
  explicit MpiComm(MPI_Comm c) : comm_(c) {}
  MPI_Comm comm_ = MPI_COMM_NULL;
};

class MpiWorld {
 public:
  // Builds the layout from MPI_COMM_WORLD's size and rank and the TP degree (validated, see
  // RankLayout::make) and splits the communicators. Collective over MPI_COMM_WORLD.
  explicit MpiWorld(int tp);
  MpiWorld(const MpiWorld&) = delete;
  MpiWorld& operator=(const MpiWorld&) = delete;

  const RankLayout& layout() const { return layout_; }
  const MpiComm& world() const { return world_; }
  const MpiComm& tp() const;        // throws on a drafter rank
  const MpiComm& drafters() const;  // throws on a target rank

 private:
  RankLayout layout_;
  MpiComm world_;
  MpiComm tp_;
  MpiComm drafters_;
};

// Ends the whole job: prints `message` (one line, to stderr) and calls MPI_Abort(MPI_COMM_WORLD,
// code) when MPI is initialised, so that mpirun kills every rank; without MPI, std::_Exit(code).
// code must be non-zero. Safe to call from any thread.
// Before it prints, abort_job runs the abort hook (if one is set), once, with the message: the
// target leader writes there what it still can (--stats-json with "status": "failed").
[[noreturn]] void abort_job(int code, std::string_view message);
// Sets (or, with an empty function, clears) the abort hook. It runs on whichever thread aborts
// (a watchdog's), so it must be thread-safe, quick, and not throw (exceptions are swallowed).
void set_abort_hook(std::function<void(std::string_view message)> hook);

}  // namespace ssd
