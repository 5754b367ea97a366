// One non-blocking NCCL communicator with its CUDA stream, owned (movable, not copyable).
//
// Created with ncclCommInitRankConfig(config.blocking = 0) on the current CUDA device (the
// device placement sets it once per process), so no NCCL call here blocks: initialisation and
// every enqueued operation are observed through status() / op_status() and waited for with
// wait_until_done (nccl_wait.h), whose failure path is fail_job(): ncclCommAbort, then the
// one-line message and abort_job(), which ends every rank of the job; never a hang.
// Several communicators can be initialised together: start() each inside one
// ncclGroupStart()/ncclGroupEnd(), then wait_ready() each.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <string>

#include "actors/transport/nccl/nccl_wait.h"

namespace ssd {

class NcclComm {
 public:
  NcclComm() = default;
  NcclComm(NcclComm&& o) noexcept;
  NcclComm& operator=(NcclComm&& o) noexcept;
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;
  ~NcclComm();  // finalizes (5 s at most) and destroys; aborts a communicator in error

  // Starts joining the communicator `id` as `rank` of `nranks` (returns at once: non-blocking).
  // subject names it in messages (subject.rank is this rank in the job).
  static NcclComm start(const ncclUniqueId& id, int nranks, int rank, WaitSubject subject);
  // Waits until initialisation finished (deadline `timeout`; fails the job otherwise).
  void wait_ready(std::chrono::milliseconds timeout);

  ncclComm_t get() const { return comm_; }
  cudaStream_t stream() const { return stream_; }
  const WaitSubject& subject() const { return subject_; }

  // The communicator's asynchronous state: kDone (ready), kPending (an enqueue or init still in
  // progress), kError (NCCL's message).
  WaitStatus status() const;
  // kDone once `event` (recorded after an operation on stream()) completed; kError when the
  // communicator or the CUDA event reports an error.
  WaitStatus op_status(cudaEvent_t event) const;
  // Waits for status() after a call that may have returned ncclInProgress (an enqueue).
  void wait_enqueued(const std::string& what, std::chrono::milliseconds timeout);
  // Records an event on `on` (default: stream(); another stream of the same device, e.g. a CUDA
  // backend's that this communicator's operations were enqueued on) and waits for it, and for
  // the communicator to stay healthy.
  void wait_stream(const std::string& what, std::chrono::milliseconds timeout,
                   cudaStream_t on = nullptr);

  // ncclCommAbort (idempotent, never throws): unblocks whatever waits on this communicator.
  void abort() noexcept;
  // The fail function of this communicator's waits: abort(), then end the job with `message`.
  [[noreturn]] void fail_job(const std::string& message) noexcept;

 private:
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t event_ = nullptr;  // wait_stream's
  WaitSubject subject_;
  bool aborted_ = false;
};

}  // namespace ssd
