// Waiting on NCCL without ever hanging: every wait of this layer (a communicator being created, a
// transfer, a collective) polls a status function until it says done, with a deadline. NCCL's
// non-blocking communicators (ncclConfig_t.blocking = 0) make this possible: no NCCL call blocks,
// a stuck peer shows up as "still in progress", a broken link as an asynchronous error.
//
// On error or timeout the wait calls its fail function with one line naming this rank, the peer
// (or the group), what it waited for, for how long, and NCCL's error; the default fail function
// (nccl_comm.h) calls ncclCommAbort and then abort_job(), which ends every rank of the job.
// The polling and the message are pure (no NCCL call), so tests drive them with a fake status.
#pragma once

#include <chrono>
#include <functional>
#include <string>

namespace ssd {

enum class WaitState { kDone, kPending, kError };

struct WaitStatus {
  WaitState state = WaitState::kPending;
  std::string error;  // NCCL's (or CUDA's) description when state == kError
};

// What a wait is about, for its failure message.
struct WaitSubject {
  int rank = 0;             // this rank, in the job (MPI_COMM_WORLD)
  int peer = -1;            // the other rank in the job; -1: the whole group
  std::string comm;         // "target TP group", "lane 0->4"
  std::string waiting_for;  // "the send of Outcome (1.2 MB)", "allgather of 4096 floats"
};

// "rank 0: NCCL error on lane 0->4 with rank 4 while waiting for <x> after 1.250 s: <error>"
// "rank 0: NCCL timed out on the target TP group (all ranks) after 30.000 s waiting for <x>"
std::string wait_failure_message(const WaitSubject& s, const WaitStatus& last, double waited_s);

using WaitStatusFn = std::function<WaitStatus()>;
using WaitFailFn = std::function<void(const std::string& message)>;  // must not return normally

// The timeout of a wait that has no deadline: an idle rank waiting for its next piece of work
// (a TP worker waiting for the leader's next call), which may come after any time (the leader
// loads, captures CUDA graphs, waits for a drafter). It still ends on kError.
inline constexpr std::chrono::milliseconds kNoDeadline = std::chrono::milliseconds::max();

// Polls `status` (sleeping 0 .. max_sleep between polls, growing) until it reports kDone, then
// returns. On kError, or when `timeout` passes while kPending, calls fail(message); if fail
// returns (a test's recorder), throws ssd::Error with the same message. timeout == kNoDeadline:
// only kError ends the wait early.
void wait_until_done(const WaitStatusFn& status, std::chrono::milliseconds timeout,
                     const WaitSubject& subject, const WaitFailFn& fail,
                     std::chrono::microseconds max_sleep = std::chrono::microseconds(100));

}  // namespace ssd
