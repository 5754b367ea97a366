// A Collective whose transport can move a device backend's memory itself, enqueued on that
// backend's stream: what lets a tensor-parallel forward stay on the device (no download / upload
// around each exchange) and be captured in a CUDA graph with its exchanges inside
// (runtime/backend/cuda/tp_exchange.cpp: Backend::allreduce_sum / gather_columns). The NCCL collective
// is one (actors/transport/nccl/nccl_collective.h); the MPI and thread collectives are not, and
// a backend falls back to their host interface.
//
// Every call only enqueues: it returns once the operation is on `stream` (a cudaStream_t) and
// never waits for it, so the calls are legal during stream capture. The caller finishes the
// exchange on the device (the rank-order sum, the column stitching: kernels/common/
// exchange_math.h) and waits through wait(), which is the watchdog: a peer that died or hangs
// ends the job with a message instead of blocking a stream synchronisation forever.
// Like every Collective, each rank of the group makes the same calls in the same order; and,
// for CUDA graphs, each rank captures (or replays) the same calls (NCCL requires it: see
// agree_region in runtime/backend/backend.h).
#pragma once

#include <cstdint>
#include <string>

#include "runtime/parallel/collective.h"

namespace ssd {

class StreamCollective {
 public:
  virtual ~StreamCollective() = default;
  // The CUDA device the transport's communicator lives on.
  virtual int device() const = 0;
  // True when sums must keep collective.h's rank order (the default): the caller gathers with
  // allgather() and adds with hd::rank_order_sum. False (--tp-mode megatron, which sums in
  // another order anyway): allreduce(), in the transport's own order, is fine.
  virtual bool rank_order_sums() const = 0;

  // out[r * count + i] = rank r's in[i] for every rank r.   in: [count], out: [size, count]
  virtual void allgather(const float* in, float* out, int64_t count, void* stream) = 0;
  // Rank r's counts[r] floats of `in` land at out + counts[0] + ... + counts[r-1].
  // counts: [size] (host, identical on every rank); out: [sum of counts].
  virtual void allgatherv(const float* in, const int64_t* counts, float* out, void* stream) = 0;
  // data[i] = the sum over ranks of data[i], in the transport's order (see rank_order_sums()).
  virtual void allreduce(float* data, int64_t count, void* stream) = 0;
  // Waits until everything enqueued on `stream` so far has finished; a transport error or a
  // timeout ends the job with a message naming `what`.
  virtual void wait(void* stream, const std::string& what) = 0;
};

// The collective's stream interface, or null when its transport has none.
inline StreamCollective* stream_collective(Collective& c) {
  return dynamic_cast<StreamCollective*>(&c);
}

}  // namespace ssd
