// The tensor-parallel group's collectives over one NCCL communicator (runtime/parallel/
// collective.h), bootstrapped from the group's MPI communicator (nccl_bootstrap.h).
//
// Order and exactness. collective.h promises allreduce_sum adds the ranks' contributions in rank
// order, bit-identical on every rank. NCCL's ncclAllReduce gives every rank the same bits in one
// run, but its summation order depends on the algorithm (ring, tree, NVLS), the chunking and the
// rank count, and is not rank order; so:
//   ReduceOrder::kRankOrder (default) keeps the promise: ncclAllGather of the T contributions,
//     then the sum in rank order on the host (T x the traffic of an all-reduce; exact).
//   ReduceOrder::kNccl uses ncclAllReduce(ncclSum): fast, same bits on every rank, but a sum in
//     NCCL's order; right for --tp-mode megatron, which already sums in another order.
// allgatherv (what --tp-mode exact uses, 4 per layer) moves bytes and adds nothing, so it is
// order-free and bit-identical to one rank with NCCL too; it is T grouped ncclBroadcasts (NCCL
// has no all-gather with per-rank counts). broadcast is ncclBroadcast of bytes.
//
// Pointers may be host or device memory (cudaPointerGetAttributes decides): host data goes
// through device staging buffers, so the CPU backend can use this collective too. The staging
// (and the event the host path orders itself with) is allocated at construction, never later:
// a cudaMalloc / cudaFree while NCCL kernels of another communicator wait on a peer (the
// drafter link's lanes) can block behind them. Host data longer than the staging moves in
// chunks of it (staged_rounds below), each a collective of its own; every rank derives the
// same chunks from the same counts and options. Every call
// waits for its result with the deadline `timeout` (nccl_wait.h); a peer that never joins ends
// the job with a message naming the operation.
//
// It is also a StreamCollective (runtime/parallel/stream_collective.h): on device memory, the
// same operations enqueued on a caller's stream (the CUDA backend's) without waiting, which is
// how a TP forward keeps its exchanges on the device and inside its CUDA graph; the backend
// finishes a rank-order sum with its own kernel and waits through wait(), this communicator's
// watchdog. Unrun on a GPU by this project so far.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "actors/transport/mpi_world.h"
#include "actors/transport/nccl/nccl_comm.h"
#include "runtime/parallel/collective.h"
#include "runtime/parallel/stream_collective.h"

namespace ssd {

enum class ReduceOrder { kRankOrder, kNccl };

struct NcclCollectiveOptions {
  ReduceOrder order = ReduceOrder::kRankOrder;
  std::chrono::milliseconds timeout{120000};  // any one collective, and the communicator's set-up
  std::string name = "target TP group";       // for messages
  // Host-path staging: this many bytes for this rank's data, ranks x this many for the gathered
  // data, allocated at construction; larger host transfers go in chunks (the same on every rank).
  size_t staging_bytes = size_t{8} << 20;
};

// One chunk of a host-staged gather: every rank r moves its entries [at, at + n[r]) (n[r] <=
// step, 0 when rank r has no entries there).
struct StagedRound {
  int64_t at = 0;
  std::vector<int64_t> n;  // [ranks]
};
// The chunks of a gather of counts[0..ranks) floats staged `step` floats per rank: round k
// covers every rank's entries [k step, (k + 1) step); none when every count is 0. step > 0.
// Pure (tested).
std::vector<StagedRound> staged_rounds(const int64_t* counts, int ranks, int64_t step);

class NcclCollective final : public Collective, public StreamCollective {
 public:
  // Collective over `group` (every member calls it); the current CUDA device must be set.
  NcclCollective(const MpiComm& group, NcclCollectiveOptions options = {});
  ~NcclCollective() override;
  NcclCollective(const NcclCollective&) = delete;
  NcclCollective& operator=(const NcclCollective&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void allreduce_sum(float* data, int64_t count) override;
  void allgatherv(const float* in, const int64_t* counts, float* out) override;
  void broadcast(void* data, int64_t bytes, int root) override;
  void broadcast_idle(void* data, int64_t bytes, int root) override;  // no deadline (collective.h)

  // StreamCollective (device memory, enqueued on `stream`, no wait).
  int device() const override { return device_; }
  bool rank_order_sums() const override { return opt_.order == ReduceOrder::kRankOrder; }
  void allgather(const float* in, float* out, int64_t count, void* stream) override;
  void allgatherv(const float* in, const int64_t* counts, float* out, void* stream) override;
  void allreduce(float* data, int64_t count, void* stream) override;
  void wait(void* stream, const std::string& what) override;

 private:
  int64_t staged_floats() const {
    return static_cast<int64_t>(opt_.staging_bytes / sizeof(float));
  }
  void enqueued(const std::string& what);  // after each NCCL call (non-blocking enqueue)
  // The stream of a host-path call: comm_.stream(), ordered after the stream operations still
  // queued on the last caller stream (external_).
  cudaStream_t host_stream();
  void wait(const std::string& what);      // for the stream: the result is in place
  // Device-to-host copy after wait() (never before: a pageable copy cannot be abandoned).
  void copy_to_host(void* dst, const void* src, size_t bytes, cudaStream_t s);
  void use_device() const;  // cudaSetDevice(device_), first in every entry point
  void broadcast_within(void* data, int64_t bytes, int root, std::chrono::milliseconds timeout);
  // allgatherv's grouped broadcasts of device blocks (in: this rank's, out: every rank's).
  void enqueue_allgatherv(const float* in, const int64_t* counts, float* out, cudaStream_t s);

  NcclCollectiveOptions opt_;
  int rank_ = 0;
  int size_ = 1;
  int device_ = 0;  // the current device at construction: the communicator's
  NcclComm comm_;
  void* stage_mine_ = nullptr;  // [staging_bytes] this rank's host data, on the device
  void* stage_all_ = nullptr;   // [size, staging_bytes] the gathered chunk
  std::vector<float> host_gather_;  // [size, chunk] for the rank-order sum
  std::vector<float> host_sum_;     // [chunk] a device buffer's rank-order sum
  cudaStream_t external_ = nullptr;      // the caller stream of the last stream operation
  cudaEvent_t external_done_ = nullptr;  // recorded on it by host_stream()
};

// Rank-order sum of `gathered` ([ranks, count] row-major) into out ([count]): out[i] =
// ((g[0][i] + g[1][i]) + g[2][i]) + ..., the order collective.h promises. Pure (tested).
void sum_in_rank_order(const float* gathered, int ranks, int64_t count, float* out);

// True when `p` is device (or managed) memory NCCL can use directly.
bool is_device_pointer(const void* p);

}  // namespace ssd
