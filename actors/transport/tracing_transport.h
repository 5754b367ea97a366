// A Transport decorator that puts every frame on the job's timeline (runtime/core/trace.h) as a
// flow: at the sender a short "send <Kind>" span holding the flow's start ('s'), at the receiver
// a "recv <Kind>" span holding its end ('f'), both with the frame's bytes. The flow's id names
// the message without a word on the wire: (sender, receiver, n) for the n-th frame between the
// two, counted at both ends (frames from one sender arrive in order, transport.h). The counters
// run whether or not recording is on, so ids stay paired if it starts mid-job; the rest costs
// one atomic load per frame when off.
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "actors/transport/transport.h"

namespace ssd {

class TracingTransport final : public Transport {
 public:
  explicit TracingTransport(std::unique_ptr<Transport> inner);

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  std::string name() const override { return inner_->name(); }
  std::optional<Envelope> try_recv() override;
  Envelope recv(std::chrono::milliseconds timeout) override;
  void send_frame(int peer, std::vector<std::byte> frame) override;
  size_t pending_sends() override { return inner_->pending_sends(); }

  // The flow id of the n-th frame (from 0) from `from` to `to`.
  static uint64_t flow_id(int from, int to, uint64_t n);

 private:
  void received(const Envelope& env);

  std::unique_ptr<Transport> inner_;
  std::mutex mu_;
  std::vector<uint64_t> sent_, received_;  // [peers] frames so far
};

}  // namespace ssd
