// N transport endpoints in one process, connected through in-memory mailboxes: the unit tests'
// stand-in for MPI (and a way to run several actors as threads of one process). Frames go through
// the same build/check/sequence path as over MPI, so a test that passes here exercises the same
// encoding. Thread-safe: each endpoint may be used from several threads.
#pragma once

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "actors/transport/transport.h"

namespace ssd {

class LoopbackHub;

class LoopbackTransport final : public Transport {
 public:
  LoopbackTransport(LoopbackHub& hub, int rank);
  LoopbackTransport(const LoopbackTransport&) = delete;
  LoopbackTransport& operator=(const LoopbackTransport&) = delete;

  int rank() const override { return rank_; }
  int size() const override;
  std::string name() const override { return "loopback"; }

  std::optional<Envelope> try_recv() override;
  Envelope recv(std::chrono::milliseconds timeout) override;  // sleeps on a condition variable
  void send_frame(int peer, std::vector<std::byte> frame) override;
  // A send is in the peer's mailbox when send_frame returns: nothing is ever pending.
  size_t pending_sends() override { return 0; }

 private:
  friend class LoopbackHub;
  Envelope accept_locked();  // pops the front frame (box lock held) and checks it

  LoopbackHub& hub_;
  int rank_;
  // Incoming frames.
  std::mutex box_mutex_;
  std::condition_variable box_cv_;
  std::deque<Envelope> box_;
  SequenceBook in_book_;
  // Outgoing sequence numbers; held while a frame is stamped and queued, so that the numbers a
  // receiver sees from this endpoint are in queue order.
  std::mutex send_mutex_;
  SequenceBook out_book_;
};

// Owns the endpoints 0..n-1.
class LoopbackHub {
 public:
  explicit LoopbackHub(int n);
  int size() const { return static_cast<int>(endpoints_.size()); }
  LoopbackTransport& endpoint(int rank);

 private:
  std::vector<std::unique_ptr<LoopbackTransport>> endpoints_;
};

}  // namespace ssd
