// TracingTransport (the --trace-json decorator): messages pass through unchanged, and with the
// recorder on every frame leaves a "send <Kind>" span holding a flow start at the sender and a
// "recv <Kind>" span holding the flow's end at the receiver, with the same id (sender, receiver,
// n-th frame between them) and the frame's bytes, whatever the order the two ranks' frames
// interleave in; with the recorder off nothing is recorded and ids stay paired afterwards.
#include "actors/transport/tracing_transport.h"

#include <gtest/gtest.h>

#include <map>

#include "actors/transport/loopback_transport.h"
#include "runtime/core/trace.h"
#include "tests/support/transport_ref.h"

namespace ssd {
namespace {

using Ref = test::TransportRef;

TEST(TracingTransport, EveryFrameIsOneFlowWithTheSameIdAtBothEnds) {
  LoopbackHub hub(2);
  TracingTransport a(std::make_unique<Ref>(hub.endpoint(0)));
  TracingTransport b(std::make_unique<Ref>(hub.endpoint(1)));
  trace::stop();
  a.send(1, Ping{1});  // before recording: counted, not recorded
  ASSERT_EQ(decode<Ping>(b.recv(std::chrono::seconds(5))).id, 1u);
  trace::start(0);  // one process: both ends record into one recorder
  a.send(1, Ping{2});
  b.send(0, Pong{2});
  a.send(1, Ping{3});
  EXPECT_EQ(decode<Pong>(a.recv(std::chrono::seconds(5))).id, 2u);
  EXPECT_EQ(decode<Ping>(b.recv(std::chrono::seconds(5))).id, 2u);
  EXPECT_EQ(decode<Ping>(b.recv(std::chrono::seconds(5))).id, 3u);
  const std::vector<trace::Event> ev = trace::stop();
  std::map<uint64_t, std::pair<const trace::Event*, const trace::Event*>> flows;
  int spans = 0;
  for (const trace::Event& e : ev) {
    if (e.ph == 's') flows[e.id].first = &e;
    if (e.ph == 'f') flows[e.id].second = &e;
    if (e.ph == 'X') {
      ++spans;
      EXPECT_TRUE(e.name.rfind("send ", 0) == 0 || e.name.rfind("recv ", 0) == 0) << e.name;
      EXPECT_GT(e.bytes, 0);
    }
  }
  EXPECT_EQ(spans, 6);
  ASSERT_EQ(flows.size(), 3u);
  for (const auto& [id, ends] : flows) {
    ASSERT_TRUE(ends.first && ends.second) << "flow " << id << " lacks an end";
    EXPECT_EQ(ends.first->name, ends.second->name);
    EXPECT_EQ(ends.first->bytes, ends.second->bytes);
    EXPECT_LE(ends.first->ts_us, ends.second->ts_us);
  }
  // The 2nd and 3rd frames from 0 to 1 (the first was sent before recording) and the first back.
  EXPECT_TRUE(flows.count(TracingTransport::flow_id(0, 1, 1)));
  EXPECT_TRUE(flows.count(TracingTransport::flow_id(0, 1, 2)));
  EXPECT_TRUE(flows.count(TracingTransport::flow_id(1, 0, 0)));
  EXPECT_EQ(flows.at(TracingTransport::flow_id(0, 1, 1)).first->name, "Ping");
}

TEST(TracingTransport, FlowIdsOfDistinctLinksDiffer) {
  EXPECT_NE(TracingTransport::flow_id(0, 1, 0), TracingTransport::flow_id(1, 0, 0));
  EXPECT_NE(TracingTransport::flow_id(0, 1, 1), TracingTransport::flow_id(0, 2, 1));
  EXPECT_NE(TracingTransport::flow_id(2, 1, 5), TracingTransport::flow_id(1, 2, 5));
}

}  // namespace
}  // namespace ssd
