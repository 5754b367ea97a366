// Transport over an MPI communicator (CPU ranks).
//
// Each transport works on its own duplicate of the communicator it is given, so two transports
// (or a transport and the collectives) never match each other's messages. A frame is one MPI
// message of bytes whose tag is its MsgKind value (the only tag numbers used are the enum's).
//   send:     MPI_Isend of a buffer the transport owns until the request completes; completed
//             sends are reaped on every later call.
//   try_recv: MPI_Improbe(any source, any tag) matches arrived messages and starts MPI_Imrecv
//             into an owned buffer; a frame is returned once its receive completes and every
//             earlier-matched frame from the same peer has been returned. MPI matches the
//             messages of one sender in send order (non-overtaking), so frames come out in order
//             per peer, and a large frame from one peer never holds back another peer's.
// A mutex serialises the transport's MPI calls (MPI_THREAD_MULTIPLE would allow concurrent calls,
// but the pending lists need one anyway, and the calls are short).
#pragma once

#include <deque>
#include <list>
#include <mutex>

#include "actors/transport/mpi_world.h"
#include "actors/transport/transport.h"

namespace ssd {

class MpiTransport final : public Transport {
 public:
  explicit MpiTransport(const MpiComm& comm);  // collective over comm (it is duplicated)
  ~MpiTransport() override;                    // waits up to 5 s for unfinished sends
  MpiTransport(const MpiTransport&) = delete;
  MpiTransport& operator=(const MpiTransport&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return "mpi"; }

  std::optional<Envelope> try_recv() override;
  void send_frame(int peer, std::vector<std::byte> frame) override;

  // Sends not yet complete (each holds its buffer); flush() is Transport's.
  size_t pending_sends() override;

 private:
  struct PendingSend {
    std::vector<std::byte> frame;
    MPI_Request request = MPI_REQUEST_NULL;
  };
  struct PendingRecv {
    int peer = -1;
    MsgKind kind{};
    std::vector<std::byte> frame;
    MPI_Request request = MPI_REQUEST_NULL;
    bool done = false;
  };
  void reap_sends_locked();

  MpiComm comm_;
  int rank_ = 0;
  int size_ = 1;
  std::mutex mutex_;
  std::list<PendingSend> sends_;   // list: buffers never move while MPI reads them
  std::deque<PendingRecv> recvs_;  // in match order
  SequenceBook in_book_;
  SequenceBook out_book_;
  std::vector<char> blocked_;  // [size] scratch of try_recv
};

}  // namespace ssd
