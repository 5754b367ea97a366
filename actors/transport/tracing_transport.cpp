#include "actors/transport/tracing_transport.h"

#include <cstring>

#include "runtime/core/trace.h"

namespace ssd {
namespace {

MsgKind kind_of(const std::vector<std::byte>& frame) {
  WireHeader h;
  if (frame.size() < sizeof h) return MsgKind{};
  std::memcpy(&h, frame.data(), sizeof h);
  return static_cast<MsgKind>(h.kind);
}

// A short span named for the message around its flow end, so the flow binds to a slice.
void record(trace::Recorder& r, char ph, const std::string& what, MsgKind kind, uint64_t id,
            int64_t bytes, double t0) {
  trace::Event span;
  span.name = what + " " + kind_name(kind);
  span.cat = "link";
  span.track = trace::track();
  span.ts_us = t0;
  span.dur_us = trace::now_us() - t0;
  span.round = trace::round();
  span.bytes = bytes;
  trace::Event f = span;
  f.ph = ph;
  f.name = kind_name(kind);
  f.id = id;
  f.ts_us = ph == 's' ? t0 : t0 + span.dur_us;  // inside the span, at the end a flow arrives at
  f.dur_us = 0;
  f.round = -1;
  r.add(std::move(span));
  r.add(std::move(f));
}

}  // namespace

TracingTransport::TracingTransport(std::unique_ptr<Transport> inner)
    : inner_(std::move(inner)),
      sent_(static_cast<size_t>(inner_->size()), 0),
      received_(static_cast<size_t>(inner_->size()), 0) {}

uint64_t TracingTransport::flow_id(int from, int to, uint64_t n) {
  return (static_cast<uint64_t>(from) << 40) | (static_cast<uint64_t>(to) << 28) | n;
}

void TracingTransport::send_frame(int peer, std::vector<std::byte> frame) {
  check_peer(*this, peer);
  // Heartbeats (the leader's sign of life, sent from a thread of its own) are no part of the
  // timeline: neither counted nor recorded, on either side, so flow ids still pair up.
  if (kind_of(frame) == MsgKind::kHeartbeat) return inner_->send_frame(peer, std::move(frame));
  uint64_t n;
  {
    std::lock_guard<std::mutex> lock(mu_);
    n = sent_[static_cast<size_t>(peer)]++;
  }
  trace::Recorder* r = trace::active();
  if (!r) return inner_->send_frame(peer, std::move(frame));
  const double t0 = trace::now_us();
  const MsgKind kind = kind_of(frame);
  const auto bytes = static_cast<int64_t>(frame.size());
  inner_->send_frame(peer, std::move(frame));
  record(*r, 's', "send", kind, flow_id(rank(), peer, n), bytes, t0);
}

void TracingTransport::received(const Envelope& env) {
  if (env.kind == MsgKind::kHeartbeat) return;
  uint64_t n;
  {
    std::lock_guard<std::mutex> lock(mu_);
    n = received_.at(static_cast<size_t>(env.peer))++;
  }
  if (trace::Recorder* r = trace::active())
    record(*r, 'f', "recv", env.kind, flow_id(env.peer, rank(), n),
           static_cast<int64_t>(env.bytes.size()), trace::now_us());
}

std::optional<Envelope> TracingTransport::try_recv() {
  std::optional<Envelope> env = inner_->try_recv();
  if (env) received(*env);
  return env;
}

Envelope TracingTransport::recv(std::chrono::milliseconds timeout) {
  Envelope env = inner_->recv(timeout);
  received(env);
  return env;
}

}  // namespace ssd
