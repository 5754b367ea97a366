// Heads written by a hostile or broken peer: a size prefix larger than the head, a bool that is
// neither 0 nor 1, an enum value past its enumerators. Each must end in an ssd::Error naming the
// kind and the peer, and a size prefix must never reach an allocation (checked with an
// allocation cap of 1 MiB: a 20-byte head may not ask for more).
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <string>
#include <thread>

#include "actors/transport/frame.h"
#include "actors/transport/handshake.h"
#include "actors/transport/loopback_transport.h"
#include "tests/unit/transport/allocation_probe.h"

namespace ssd {
namespace {

using transport_test::AllocationCap;

// Appends the raw bytes of `v` (Cereal's binary layout: little-endian, no padding).
struct HeadWriter {
  std::vector<std::byte> bytes;
  template <class T> HeadWriter& put(T v) {
    const size_t at = bytes.size();
    bytes.resize(at + sizeof v);
    std::memcpy(bytes.data() + at, &v, sizeof v);
    return *this;
  }
};

Envelope envelope(MsgKind kind, const HeadWriter& head, int peer = 5) {
  Envelope env;
  env.peer = peer;
  env.kind = kind;
  env.bytes = build_frame(kind, head.bytes, {});
  return env;
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

constexpr size_t kCap = size_t{1} << 20;

TEST(HostileHead, HugeTokenCountIsRefusedBeforeAllocating) {
  // Outcome: round, one SeqOutcome {seq, accepted, emitted = 2^31 tokens} and nothing more.
  HeadWriter h;
  h.put<int64_t>(3).put<uint64_t>(1).put<int32_t>(0).put<int32_t>(0).put<uint64_t>(1ull << 31);
  const Envelope env = envelope(MsgKind::kOutcome, h);
  AllocationCap cap(kCap);
  const std::string err = error_of([&] { decode<Outcome>(env); });
  EXPECT_EQ(cap.largest_refused(), 0u) << "a peer's size prefix reached an allocation";
  EXPECT_NE(err.find("Outcome from rank 5"), std::string::npos) << err;
  EXPECT_NE(err.find("size prefix of 2147483648 elements"), std::string::npos) << err;
}

TEST(HostileHead, HugeSpeculationCountIsRefusedBeforeAllocating) {
  HeadWriter h;
  h.put<int64_t>(1).put<uint64_t>(1ull << 31);
  const Envelope env = envelope(MsgKind::kSpeculation, h);
  AllocationCap cap(kCap);
  const std::string err = error_of([&] { decode<SpeculationMsg>(env); });
  EXPECT_EQ(cap.largest_refused(), 0u) << "a peer's size prefix reached an allocation";
  EXPECT_NE(err.find("Speculation from rank 5"), std::string::npos) << err;
  EXPECT_NE(err.find("size prefix"), std::string::npos) << err;
}

TEST(HostileHead, HugeStringIsRefusedBeforeAllocating) {
  HeadWriter h;  // ErrorMsg: rank, role, what = 2^40 chars
  h.put<int32_t>(1).put<uint8_t>(1).put<uint64_t>(1ull << 40);
  const Envelope env = envelope(MsgKind::kError, h);
  AllocationCap cap(kCap);
  const std::string err = error_of([&] { decode<ErrorMsg>(env); });
  EXPECT_EQ(cap.largest_refused(), 0u);
  EXPECT_NE(err.find("size prefix of 1099511627776 elements"), std::string::npos) << err;
}

TEST(HostileHead, SizePrefixThatFitsStillDecodes) {
  // The bound is the bytes left: a prefix of exactly the elements present is fine.
  Outcome o;
  o.round = 2;
  o.seqs.push_back(SeqOutcome{4, 2, {7, 8, 9}, 10, 0});
  Envelope env;
  env.peer = 1;
  env.kind = MsgKind::kOutcome;
  env.bytes = encode_frame(o);
  AllocationCap cap(kCap);
  EXPECT_EQ(decode<Outcome>(env), o);
  EXPECT_EQ(cap.largest_refused(), 0u);
}

TEST(HostileHead, BoolOtherThanZeroOrOneIsRefused) {
  HeadWriter h;  // HelloReply: ok = 2, what = ""
  h.put<uint8_t>(2).put<uint64_t>(0);
  const Envelope env = envelope(MsgKind::kHelloReply, h);
  const std::string err = error_of([&] { detail::decode_head<HelloReply>(env, false); });
  EXPECT_NE(err.find("HelloReply from rank 5"), std::string::npos) << err;
  EXPECT_NE(err.find("a bool holds 2"), std::string::npos) << err;
}

TEST(HostileHead, RoleOutsideTheEnumIsRefused) {
  Hello hello;
  hello.world = 2;
  hello.rank = 1;
  hello.role = static_cast<Role>(7);
  Envelope env;
  env.peer = 1;
  env.kind = MsgKind::kHello;
  env.bytes = encode_frame(hello);
  const std::string err = error_of([&] { detail::decode_head<Hello>(env, false); });
  EXPECT_NE(err.find("Hello from rank 1"), std::string::npos) << err;
  EXPECT_NE(err.find("enum value 7"), std::string::npos) << err;
}

TEST(HostileHead, SpeculationSourceOutsideTheEnumIsRefused) {
  SpeculationMsg m;
  m.seqs.push_back(SeqSpeculation{0, 9, {1}, {ProcessedDist{}}});
  Envelope env;
  env.peer = 2;
  env.kind = MsgKind::kSpeculation;
  env.bytes = encode_frame(m);
  const std::string err = error_of([&] { decode<SpeculationMsg>(env); });
  EXPECT_NE(err.find("enum value 9"), std::string::npos) << err;
}

// A leader-drafted speculation (--miss-at leader) the drafter could not adopt fails to decode,
// naming the sequence and what is wrong.
std::string outcome_error(const SeqOutcome& so) {
  Outcome o;
  o.seqs.push_back(so);
  Envelope env;
  env.peer = 3;
  env.kind = MsgKind::kOutcome;
  env.bytes = encode_frame(o);
  return error_of([&] { decode<Outcome>(env); });
}

TEST(HostileHead, MalformedLeaderDraftedSpeculationIsRefused) {
  const ProcessedDist one{{TokenProb{5, 1.0f}}};
  const auto primary = static_cast<uint8_t>(SpecSource::kPrimary);
  SeqOutcome ok{4, 0, {7}, 0, 0, 2, false, true, SeqSpeculation{4, primary, {5}, {one}}};
  EXPECT_EQ(outcome_error(ok), "(no error)");

  SeqOutcome lengths = ok;
  lengths.drafted.tokens = {5, 6};
  std::string err = outcome_error(lengths);
  EXPECT_NE(err.find("Outcome from rank 3"), std::string::npos) << err;
  EXPECT_NE(err.find("sequence 4: the leader-drafted speculation has 2 tokens but 1 distri"),
            std::string::npos)
      << err;

  SeqOutcome both = ok;
  both.pushed = true;
  err = outcome_error(both);
  EXPECT_NE(err.find("both pushed and leader_drafted"), std::string::npos) << err;

  SeqOutcome cached = ok;
  cached.drafted.source = static_cast<uint8_t>(SpecSource::kCache);
  err = outcome_error(cached);
  EXPECT_NE(err.find("has source 1 (primary or backup expected)"), std::string::npos) << err;

  SeqOutcome other = ok;
  other.drafted.seq = 9;
  EXPECT_NE(outcome_error(other).find("names sequence 9"), std::string::npos);

  SeqOutcome step = ok;
  step.next_k = 0;
  EXPECT_NE(outcome_error(step).find("for a decode step"), std::string::npos);

  SeqOutcome unflagged = ok;
  unflagged.leader_drafted = false;
  EXPECT_NE(outcome_error(unflagged).find("without leader_drafted set"), std::string::npos);
}

TEST(HostileHead, MissLookupOutsideTheEnumIsRefused) {
  SpeculationMsg m;
  m.miss_lookup = 3;
  Envelope env;
  env.peer = 2;
  env.kind = MsgKind::kSpeculation;
  env.bytes = encode_frame(m);
  EXPECT_NE(error_of([&] { decode<SpeculationMsg>(env); }).find("enum value 3"),
            std::string::npos);
}

// A Hello whose role is neither target nor drafter reaches rank 0's judgement of the job: rank 0
// must refuse it with a message, not crash.
TEST(HostileHead, HandshakeRefusesAHelloWithAnInvalidRole) {
  LoopbackHub hub(2);
  std::string err0, err1;
  std::thread r1([&] {
    Hello h = make_hello(RankLayout::make(2, 1, 1), 1, 2);
    h.role = static_cast<Role>(7);
    try {
      handshake(hub.endpoint(1), h, std::chrono::seconds(2));
    } catch (const Error& e) {
      err1 = e.what();
    }
  });
  try {
    handshake(hub.endpoint(0), make_hello(RankLayout::make(2, 0, 1), 1, 2),
              std::chrono::seconds(5));
  } catch (const Error& e) {
    err0 = e.what();
  }
  r1.join();
  EXPECT_NE(err0.find("Hello from rank 1"), std::string::npos) << err0;
  EXPECT_NE(err0.find("enum value 7"), std::string::npos) << err0;
  EXPECT_NE(err1, "") << "rank 1 must not start a job rank 0 refused";
}

}  // namespace
}  // namespace ssd
