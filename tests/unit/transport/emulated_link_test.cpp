// EmulatedLink (--link-emulate): which frames it delays (target<->drafter only, both ways), that a
// round trip over the emulated link takes at least twice the emulated one-way latency (a lower
// bound the delay guarantees, not a timing measurement that could flake), that a bandwidth limit
// holds frames back by their size too, that frames to one peer keep their order whatever their
// sizes, that flush() waits for held frames, and that a malformed --link-emulate is refused with a
// message naming it.
#include "actors/transport/emulated_link.h"

#include <gtest/gtest.h>

#include <chrono>

#include "actors/transport/loopback_transport.h"
#include "runtime/core/error.h"
#include "tests/support/transport_ref.h"

namespace ssd {
namespace {

using Ref = test::TransportRef;

using Clock = std::chrono::steady_clock;
double us_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

TEST(EmulatedLink, DelaysOnlyTargetDrafterFrames) {
  LoopbackHub hub(4);  // tp = 2: ranks 0, 1 target; 2, 3 drafters
  EmulatedLink t0(std::make_unique<Ref>(hub.endpoint(0)), 2, {1000, 0});
  EmulatedLink d2(std::make_unique<Ref>(hub.endpoint(2)), 2, {1000, 0});
  EXPECT_FALSE(t0.emulated(1));
  EXPECT_TRUE(t0.emulated(2));
  EXPECT_TRUE(t0.emulated(3));
  EXPECT_TRUE(d2.emulated(0));
  EXPECT_TRUE(d2.emulated(1));
  EXPECT_FALSE(d2.emulated(3));
}

TEST(EmulatedLink, RoundTripTakesAtLeastTwiceTheLatency) {
  constexpr double kLatencyUs = 3000;
  LoopbackHub hub(2);
  EmulatedLink target(std::make_unique<Ref>(hub.endpoint(0)), 1, {kLatencyUs, 0});
  EmulatedLink drafter(std::make_unique<Ref>(hub.endpoint(1)), 1, {kLatencyUs, 0});
  for (uint64_t i = 0; i < 3; ++i) {
    const auto t0 = Clock::now();
    target.send(1, Ping{i});
    const Envelope ping = drafter.recv(std::chrono::seconds(5));
    EXPECT_GE(us_since(t0), kLatencyUs) << "one way";
    drafter.send(0, Pong{decode<Ping>(ping).id});
    EXPECT_EQ(decode<Pong>(target.recv(std::chrono::seconds(5))).id, i);
    EXPECT_GE(us_since(t0), 2 * kLatencyUs) << "round trip " << i;
  }
}

TEST(EmulatedLink, BandwidthHoldsFramesByTheirSizeAndKeepsOrder) {
  LoopbackHub hub(2);
  // 0.001 GB/s = 1e6 B/s: 4 frames of 2000 B are at least 8 ms on the wire.
  EmulatedLink target(std::make_unique<Ref>(hub.endpoint(0)), 1, {0, 0.001});
  const auto t0 = Clock::now();
  const std::vector<uint8_t> big(2000, 7), small(8, 1);
  for (int i = 0; i < 4; ++i) {
    target.send_raw(1, MsgKind::kRawBytes, as_bytes_of(big));
    target.send(1, Ping{static_cast<uint64_t>(i)});  // a small frame after each big one
  }
  EXPECT_GT(target.pending_sends(), 0u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(hub.endpoint(1).recv(std::chrono::seconds(5)).kind, MsgKind::kRawBytes);
    EXPECT_EQ(decode<Ping>(hub.endpoint(1).recv(std::chrono::seconds(5))).id,
              static_cast<uint64_t>(i));
  }
  EXPECT_GE(us_since(t0), 8000.0);
  EXPECT_TRUE(target.flush(std::chrono::seconds(1)));
  EXPECT_EQ(target.pending_sends(), 0u);
}

TEST(EmulatedLink, ParsesTheFlagAndRefusesBadValues) {
  LinkEmulation l = parse_link_emulation("500");
  EXPECT_EQ(l.latency_us, 500);
  EXPECT_EQ(l.gbps, 0);
  l = parse_link_emulation("250.5,12");
  EXPECT_EQ(l.latency_us, 250.5);
  EXPECT_EQ(l.gbps, 12);
  EXPECT_FALSE(parse_link_emulation("0").active());
  for (const char* bad : {"", "abc", "-5", "5,", "5,0", "5,x", "1e999", "5us"}) {
    try {
      parse_link_emulation(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("--link-emulate"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace ssd
