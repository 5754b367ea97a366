// Point-to-point messaging between the ranks of one group, as the actors see it: typed control
// messages (protocol.h structs, Cereal-encoded), optionally followed by raw bulk bytes, and raw
// buffers alone. Implementations: MpiTransport (CPU ranks), LoopbackTransport (N endpoints in one
// process, for tests); an NCCL one (GPU bulk data) fits the same interface, since nothing here
// names MPI.
//
// Semantics every implementation keeps:
//   - send() copies what it needs and returns at once; the frame is delivered even if the caller
//     reuses its buffers (sends are owned by the transport until complete).
//   - Frames from one sender arrive in the order sent (see protocol.h), checked by sequence number.
//   - try_recv() never blocks; recv() blocks at most `timeout` and then throws TransportTimeout.
//   - Any thread may call any method (the actor loop polls while a compute thread sends).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "actors/transport/frame.h"
#include "actors/transport/protocol.h"
#include "runtime/core/error.h"

namespace ssd {

// recv() gave up waiting (a distinct type so that a caller can tell it from a bad message).
class TransportTimeout : public Error {
 public:
  using Error::Error;
};

class Transport {
 public:
  virtual ~Transport() = default;

  virtual int rank() const = 0;  // this endpoint's rank in the group
  virtual int size() const = 0;  // ranks in the group
  virtual std::string name() const = 0;

  // Sends a typed message (kind from the type: a message and its kind cannot disagree).
  template <Message T> void send(int peer, const T& msg) { send_frame(peer, encode_frame(msg)); }
  // A typed message followed by raw bulk bytes (Features + its floats).
  template <Message T> void send(int peer, const T& msg, std::span<const std::byte> bulk) {
    send_frame(peer, encode_frame(msg, bulk));
  }
  // Raw bytes under `kind`, no head; the receiver reads them with Envelope::bulk().
  void send_raw(int peer, MsgKind kind, std::span<const std::byte> bytes) {
    send_frame(peer, build_frame(kind, {}, bytes));
  }

  // A complete frame if one has arrived (checked: size, magic, sequence), else nothing.
  virtual std::optional<Envelope> try_recv() = 0;
  // Waits for a frame; throws TransportTimeout naming the rank and the wait after `timeout`.
  virtual Envelope recv(std::chrono::milliseconds timeout);

  // Sends a frame built by build_frame()/encode_frame(); the transport stamps its sequence number.
  virtual void send_frame(int peer, std::vector<std::byte> frame) = 0;

  // Sends handed to this transport that have not completed yet (advancing them as it counts).
  virtual size_t pending_sends() = 0;
  // Waits until every send has completed or `timeout` has passed; true when all completed. The
  // one flush-with-deadline of every transport (a closing transport calls it before it frees
  // the buffers the network may still read).
  bool flush(std::chrono::milliseconds timeout);

 protected:
  // Polls try_recv() with a growing sleep (0 .. max_sleep) until `deadline`.
  Envelope poll_until(std::chrono::steady_clock::time_point deadline,
                      std::chrono::microseconds max_sleep);
  [[noreturn]] void throw_timeout(std::chrono::milliseconds waited) const;
};

// Per-peer sequence numbers of one endpoint: next() for outgoing frames, accept() for incoming.
class SequenceBook {
 public:
  explicit SequenceBook(int n_peers) : out_(n_peers, 0), in_(n_peers, 0) {}
  uint64_t next(int peer) { return out_.at(peer)++; }
  // Throws naming both numbers when a frame from `peer` is not the one expected next.
  void accept(int self, int peer, const WireHeader& h);

 private:
  std::vector<uint64_t> out_;
  std::vector<uint64_t> in_;
};

// Throws unless 0 <= peer < size (names the transport and the group size).
void check_peer(const Transport& t, int peer);

}  // namespace ssd
