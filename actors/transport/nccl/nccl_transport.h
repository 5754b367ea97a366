// Transport (actors/transport/transport.h) whose bulk bytes travel over NCCL between GPU ranks.
//
// NCCL has no probe and no tags: a receive must be posted with its peer and size, and the
// operations of one communicator run in the order they were enqueued on every rank, so two ranks
// that each send to the other before receiving can deadlock. The transport contract (send at any
// time, try_recv from any peer, in order per peer) is therefore kept like this:
//   - control plane: MPI (a private duplicate of the group's communicator). Every frame's
//     32-byte header goes first as one MPI message whose tag is its kind, as in MpiTransport; a
//     frame under `nccl_min_bytes` goes whole in that message (nccl_frames.h).
//   - data plane: one 2-rank NCCL communicator per direction and peer (a "lane": i->j carries
//     only i's sends to j), so a lane's operations are one-way and always match in order, and no
//     pair of ranks can wait on each other. The payload of a large frame goes over its lane in
//     chunks of `chunk_bytes` through pinned host + device staging buffers: the header (its size
//     prefix) arrives by MPI, then the receiver posts exactly the matching receives.
//   - lanes are bootstrapped from ids that group rank 0 creates and broadcasts over MPI
//     (nccl_bootstrap.h), initialised together in one NCCL group, and each is warmed up with a
//     1-byte exchange in the constructor, so no connection is set up lazily mid-run.
// Nothing blocks: send_frame enqueues; progress (on every call) advances each lane one chunk at a
// time as the previous one completes. A chunk that does not complete within `timeout`, or an
// NCCL asynchronous error, aborts the lane's communicator and ends the job with a message naming
// this rank, the peer, and the frame it was moving (nccl_wait.h). Frames arrive checked as with
// MpiTransport (size, magic, per-peer sequence numbers).
// Cost: 2(N-1) communicators per rank for a group of N; the default use is the job's world (the
// leader <-> drafter link), N = T + drafters. Unrun on a GPU by this project so far.
#pragma once

#include <chrono>
#include <deque>
#include <list>
#include <memory>
#include <mutex>
#include <vector>

#include "actors/transport/mpi_world.h"
#include "actors/transport/nccl/nccl_comm.h"
#include "actors/transport/transport.h"

namespace ssd {

struct NcclTransportOptions {
  size_t nccl_min_bytes = size_t{64} << 10;  // frames this large send their payload over NCCL
  size_t chunk_bytes = size_t{4} << 20;      // staging buffer of a lane (device and pinned host)
  std::chrono::milliseconds timeout{120000};  // the lanes' set-up, and any one chunk in flight
};

class NcclTransport final : public Transport {
 public:
  // Collective over `comm`; the current CUDA device must be this rank's (device placement).
  explicit NcclTransport(const MpiComm& comm, NcclTransportOptions options = {});
  ~NcclTransport() override;  // waits up to 5 s for unfinished sends
  NcclTransport(const NcclTransport&) = delete;
  NcclTransport& operator=(const NcclTransport&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return "nccl"; }

  std::optional<Envelope> try_recv() override;
  void send_frame(int peer, std::vector<std::byte> frame) override;

  // Frames whose MPI part or NCCL payload is not done (advances the lanes); flush() is
  // Transport's.
  size_t pending_sends() override;

 private:
  struct Lane;
  struct OutFrame {
    int peer = -1;
    std::vector<std::byte> frame;
    MPI_Request request = MPI_REQUEST_NULL;  // the header (or whole frame) over MPI
    bool mpi_done = false;
    bool over_nccl = false;
    size_t chunks_done = 0;
  };
  struct InFrame {
    int peer = -1;
    MsgKind kind{};
    std::vector<std::byte> frame;
    MPI_Request request = MPI_REQUEST_NULL;
    bool mpi_done = false;
    bool over_nccl = false;  // payload still to come over the lane
    bool queued = false;     // on its lane's receive queue
    size_t chunks_done = 0;
    bool done = false;
  };

  void progress_locked();
  void progress_out_lane_locked(int peer);
  void progress_in_lane_locked(int peer);

  MpiComm comm_;
  NcclTransportOptions opt_;
  int rank_ = 0;
  int size_ = 1;
  int world_rank_ = 0;
  int device_ = 0;  // the CUDA device current at construction: every entry point makes it current
  std::mutex mutex_;
  std::vector<std::unique_ptr<Lane>> out_lanes_;  // [size] this rank -> peer (null for self)
  std::vector<std::unique_ptr<Lane>> in_lanes_;   // [size] peer -> this rank
  std::list<OutFrame> sends_;                     // list: buffers never move while in flight
  std::vector<std::deque<OutFrame*>> out_queue_;  // [size] frames with an NCCL payload, in order
  std::list<InFrame> recvs_;                      // in match order (list: queued by address)
  std::vector<std::deque<InFrame*>> in_queue_;    // [size] NCCL payloads to receive, in order
  SequenceBook in_book_;
  SequenceBook out_book_;
  std::vector<char> blocked_;  // [size] scratch of try_recv
};

// Index of lane i -> j's unique id among the size * (size - 1) lanes of a group (i != j):
// i * (size - 1) + (j < i ? j : j - 1). Pure (tested).
inline size_t lane_id_index(int i, int j, int size) {
  return static_cast<size_t>(i) * static_cast<size_t>(size - 1) +
         static_cast<size_t>(j < i ? j : j - 1);
}

}  // namespace ssd
