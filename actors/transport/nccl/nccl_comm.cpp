// Non-blocking NCCL communicator (see nccl_comm.h).
#include "actors/transport/nccl/nccl_comm.h"

#include <fmt/format.h>

#include <cstdio>
#include <thread>
#include <utility>

#include "actors/transport/mpi_world.h"
#include "actors/transport/nccl/nccl_check.h"
#include "runtime/core/error.h"

namespace ssd {

NcclComm::NcclComm(NcclComm&& o) noexcept
    : comm_(std::exchange(o.comm_, nullptr)),
      stream_(std::exchange(o.stream_, nullptr)),
      event_(std::exchange(o.event_, nullptr)),
      subject_(std::move(o.subject_)),
      aborted_(o.aborted_) {}

NcclComm& NcclComm::operator=(NcclComm&& o) noexcept {
  if (this != &o) {
    this->~NcclComm();
    new (this) NcclComm(std::move(o));
  }
  return *this;
}

NcclComm::~NcclComm() {
  if (comm_ && !aborted_) {
    // Finalize flushes outstanding work; a peer that is gone makes it stall, so 5 s at most,
    // then abort (the job is ending either way).
    bool clean = ncclCommFinalize(comm_) != ncclSystemError;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (clean && status().state == WaitState::kPending) {
      if (std::chrono::steady_clock::now() >= deadline) clean = false;
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    if (clean && status().state == WaitState::kDone) {
      ncclCommDestroy(comm_);
    } else {
      ncclCommAbort(comm_);
    }
  }
  if (event_) cudaEventDestroy(event_);
  if (stream_) cudaStreamDestroy(stream_);
}

NcclComm NcclComm::start(const ncclUniqueId& id, int nranks, int rank, WaitSubject subject) {
  NcclComm c;
  c.subject_ = std::move(subject);
  SSD_CUDA_CHECK(cudaStreamCreateWithFlags(&c.stream_, cudaStreamNonBlocking));
  SSD_CUDA_CHECK(cudaEventCreateWithFlags(&c.event_, cudaEventDisableTiming));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  SSD_NCCL_CHECK(ncclCommInitRankConfig(&c.comm_, nranks, id, rank, &config));
  return c;
}

void NcclComm::wait_ready(std::chrono::milliseconds timeout) {
  WaitSubject s = subject_;
  s.waiting_for = "the communicator to form (ncclCommInitRankConfig)";
  wait_until_done([this] { return status(); }, timeout, s,
                  [this](const std::string& m) { fail_job(m); });
}

WaitStatus NcclComm::status() const {
  if (!comm_) return {WaitState::kError, "no communicator"};
  ncclResult_t async = ncclSuccess;
  const ncclResult_t rc = ncclCommGetAsyncError(comm_, &async);
  if (rc != ncclSuccess) return {WaitState::kError, ncclGetErrorString(rc)};
  if (async == ncclInProgress) return {WaitState::kPending, {}};
  if (async != ncclSuccess)
    return {WaitState::kError, fmt::format("{} ({})", ncclGetErrorString(async),
                                           ncclGetLastError(comm_))};
  return {WaitState::kDone, {}};
}

WaitStatus NcclComm::op_status(cudaEvent_t event) const {
  WaitStatus comm = status();
  if (comm.state == WaitState::kError) return comm;
  const cudaError_t q = cudaEventQuery(event);
  if (q == cudaErrorNotReady) return {WaitState::kPending, {}};
  if (q != cudaSuccess) return {WaitState::kError, cudaGetErrorString(q)};
  return comm.state == WaitState::kPending ? WaitStatus{} : WaitStatus{WaitState::kDone, {}};
}

void NcclComm::wait_enqueued(const std::string& what, std::chrono::milliseconds timeout) {
  WaitSubject s = subject_;
  s.waiting_for = what;
  wait_until_done([this] { return status(); }, timeout, s,
                  [this](const std::string& m) { fail_job(m); });
}

void NcclComm::wait_stream(const std::string& what, std::chrono::milliseconds timeout,
                           cudaStream_t on) {
  SSD_CUDA_CHECK(cudaEventRecord(event_, on ? on : stream_));
  WaitSubject s = subject_;
  s.waiting_for = what;
  wait_until_done([this] { return op_status(event_); }, timeout, s,
                  [this](const std::string& m) { fail_job(m); });
}

void NcclComm::abort() noexcept {
  if (comm_ && !aborted_) {
    aborted_ = true;
    ncclCommAbort(comm_);
  }
}

void NcclComm::fail_job(const std::string& message) noexcept {
  abort();
  abort_job(1, "ssd: " + message);
}

}  // namespace ssd
