// A non-owning view of a transport (say, one endpoint of a loopback hub), so that a decorator
// under test, which owns "its" transport, can wrap an endpoint the test keeps using.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "actors/transport/transport.h"

namespace ssd::test {

class TransportRef final : public Transport {
 public:
  explicit TransportRef(Transport& t) : t_(t) {}
  int rank() const override { return t_.rank(); }
  int size() const override { return t_.size(); }
  std::string name() const override { return t_.name(); }
  std::optional<Envelope> try_recv() override { return t_.try_recv(); }
  Envelope recv(std::chrono::milliseconds timeout) override { return t_.recv(timeout); }
  void send_frame(int peer, std::vector<std::byte> frame) override {
    t_.send_frame(peer, std::move(frame));
  }
  size_t pending_sends() override { return t_.pending_sends(); }

 private:
  Transport& t_;
};

}  // namespace ssd::test
