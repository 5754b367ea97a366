// --link-emulate LATENCY_US[,GBPS]: a slower link between the target and the drafters, for
// studying how SSD's overlap degrades with distance, on any transport (MPI, NCCL, loopback). A
// Transport decorator that delays every frame between a target rank (0..T-1) and a drafter rank
// (T..N-1), in either direction; frames among the target ranks or among the drafter ranks pass at
// once (the TP group's collectives do not go through this transport at all).
//
// The model of the link, per (this rank, peer): one message on the wire at a time at GBPS
// (1e9 bytes/s; 0 = unlimited), then a one-way LATENCY_US of flight:
//     start   = max(now, the end of the previous frame's transmission to this peer)
//     release = start + bytes / bandwidth + latency
// The frame is handed to the inner transport at `release` by a sender thread. Release times are
// non-decreasing per peer, and equal ones keep their send order, so frames to one peer keep their
// order (transport.h's promise). send() still returns at once; pending_sends() counts the frames
// held back, so flush() waits for them too.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <queue>
#include <string>
#include <thread>
#include <vector>

#include "actors/transport/transport.h"

namespace ssd {

struct LinkEmulation {
  double latency_us = 0;  // one way, added to every target<->drafter frame
  double gbps = 0;        // bandwidth limit in GB/s (1e9 B/s); 0 = none
  bool active() const { return latency_us > 0 || gbps > 0; }
};

// "LATENCY_US" or "LATENCY_US,GBPS"; throws ssd::Error naming --link-emulate and what is wrong.
LinkEmulation parse_link_emulation(const std::string& text);

class EmulatedLink final : public Transport {
 public:
  // tp: the target ranks are 0..tp-1.
  EmulatedLink(std::unique_ptr<Transport> inner, int tp, LinkEmulation link);
  ~EmulatedLink() override;  // hands every held frame to the inner transport first
  EmulatedLink(const EmulatedLink&) = delete;
  EmulatedLink& operator=(const EmulatedLink&) = delete;

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  std::string name() const override { return inner_->name(); }
  std::optional<Envelope> try_recv() override { return inner_->try_recv(); }
  Envelope recv(std::chrono::milliseconds timeout) override { return inner_->recv(timeout); }
  void send_frame(int peer, std::vector<std::byte> frame) override;
  size_t pending_sends() override;

  // Whether frames to `peer` cross the emulated link (one end a target rank, the other not).
  bool emulated(int peer) const;

 private:
  using Clock = std::chrono::steady_clock;
  struct Held {
    Clock::time_point release;
    uint64_t order;  // send order: ties keep it
    int peer;
    std::vector<std::byte> frame;
    bool operator>(const Held& o) const {
      return release != o.release ? release > o.release : order > o.order;
    }
  };
  void run();

  std::unique_ptr<Transport> inner_;
  int tp_;
  LinkEmulation link_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::priority_queue<Held, std::vector<Held>, std::greater<>> held_;
  std::vector<Clock::time_point> wire_free_;  // [peers] end of the last transmission
  uint64_t next_order_ = 0;
  size_t in_flight_ = 0;          // taken from held_, not yet handed to the inner transport
  std::exception_ptr error_;      // the sender thread's failure, rethrown to the next caller
  bool stopping_ = false;
  std::thread sender_;
};

}  // namespace ssd
