// The in-process transport: order per sender under concurrent senders, typed + bulk + raw frames,
// a bounded blocking receive, peer checks, and the sequence-number check that catches a lost or
// reordered frame.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

#include "actors/transport/loopback_transport.h"

namespace ssd {
namespace {

TEST(Loopback, OrderPerSenderUnderConcurrentSenders) {
  constexpr int kSenders = 3, kEach = 3000;
  LoopbackHub hub(kSenders + 1);
  std::vector<std::thread> senders;
  for (int s = 1; s <= kSenders; ++s)
    senders.emplace_back([&hub, s] {
      for (int i = 0; i < kEach; ++i) hub.endpoint(s).send(0, Ping{static_cast<uint64_t>(i)});
    });
  std::vector<uint64_t> next(kSenders + 1, 0);
  Transport& me = hub.endpoint(0);
  for (int got = 0; got < kSenders * kEach; ++got) {
    const Envelope env = me.recv(std::chrono::seconds(10));
    ASSERT_EQ(env.kind, MsgKind::kPing);
    ASSERT_EQ(decode<Ping>(env).id, next[env.peer]++) << "from rank " << env.peer;
  }
  for (std::thread& t : senders) t.join();
  for (int s = 1; s <= kSenders; ++s) EXPECT_EQ(next[s], uint64_t{kEach});
  EXPECT_FALSE(me.try_recv().has_value());
}

TEST(Loopback, MixedKindsKeepTheirOrder) {
  LoopbackHub hub(2);
  const std::vector<float> feats = {1.5f, -2.25f, 3.0f, 0.0f};
  hub.endpoint(1).send(0, Heartbeat{1, "drafting", 3});
  hub.endpoint(1).send(0, Features{4, 10, 1, 4}, as_bytes_of(feats));
  hub.endpoint(1).send_raw(0, MsgKind::kRawBytes, as_bytes_of(std::vector<uint8_t>{9, 8}));
  Transport& me = hub.endpoint(0);
  Envelope a = *me.try_recv(), b = *me.try_recv(), c = *me.try_recv();
  EXPECT_EQ(decode<Heartbeat>(a).phase, "drafting");
  EXPECT_EQ(decode<Features>(b), (Features{4, 10, 1, 4}));
  const std::span<const float> got = b.bulk_as<float>();
  EXPECT_EQ(std::vector<float>(got.begin(), got.end()), feats);
  EXPECT_EQ(c.kind, MsgKind::kRawBytes);
  EXPECT_EQ(c.bulk().size(), 2u);
}

TEST(Loopback, RecvTimesOutWithinBound) {
  LoopbackHub hub(2);
  const auto start = std::chrono::steady_clock::now();
  try {
    hub.endpoint(1).recv(std::chrono::milliseconds(50));
    FAIL() << "recv returned without a message";
  } catch (const TransportTimeout& e) {
    EXPECT_NE(std::string(e.what()).find("rank 1 timed out after 0.0"), std::string::npos)
        << e.what();
  }
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
                            .count();
  // At least the timeout; at most 1 s (the timeout plus generous scheduling slack on a loaded
  // 2-core machine).
  EXPECT_GE(waited, 0.05);
  EXPECT_LT(waited, 1.0);
}

TEST(Loopback, BadPeerIsNamed) {
  LoopbackHub hub(2);
  try {
    hub.endpoint(0).send(2, Ping{});
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "loopback transport: peer rank 2 is outside 0..1");
  }
}

TEST(Loopback, SequenceGapIsReported) {
  SequenceBook book(2);
  WireHeader h;
  h.kind = static_cast<uint16_t>(MsgKind::kOutcome);
  h.seq = 0;
  book.accept(0, 1, h);
  h.seq = 1;
  book.accept(0, 1, h);
  h.seq = 3;
  try {
    book.accept(0, 1, h);
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "rank 0 got frame number 3 (Outcome) from rank 1, expected number 2: a frame was "
                 "lost or reordered");
  }
  EXPECT_EQ(book.next(1), 0u);
  EXPECT_EQ(book.next(1), 1u);
}

}  // namespace
}  // namespace ssd
