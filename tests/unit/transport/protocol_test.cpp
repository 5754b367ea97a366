// Frames and message encoding: every message survives a round trip field for field, bulk bytes
// arrive aligned and unchanged, and every kind of damage to a frame gives an error that says what
// is wrong (asserted on the message text, not only on the throw).
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <set>
#include <string>

#include "actors/transport/frame.h"
#include "actors/transport/protocol.h"
#include "tests/unit/transport/message_samples.h"

namespace ssd {
namespace {

using transport_test::sample_messages;

Envelope envelope_of(std::vector<std::byte> frame, int peer = 3) {
  Envelope env;
  env.peer = peer;
  WireHeader h;
  std::memcpy(&h, frame.data(), sizeof h);
  env.kind = static_cast<MsgKind>(h.kind);
  env.bytes = std::move(frame);
  check_frame(env.bytes, peer);
  return env;
}

WireHeader header_of(const std::vector<std::byte>& frame) {
  WireHeader h;
  std::memcpy(&h, frame.data(), sizeof h);
  return h;
}

void set_header(std::vector<std::byte>& frame, const WireHeader& h) {
  std::memcpy(frame.data(), &h, sizeof h);
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Protocol, KindsHaveUniqueNamesAndValidTags) {
  std::set<std::string> names;
  // Every kind but RawBytes (no struct) has a sample, so the round-trip test below covers it.
  std::set<uint16_t> sampled;
  std::apply([&](const auto&... m) { (sampled.insert(static_cast<uint16_t>(m.kKind)), ...); },
             sample_messages());
  int known = 0;
  for (uint32_t v = 0; v < 0x10000; ++v) {
    if (!is_known_kind(static_cast<uint16_t>(v))) continue;
    ++known;
    if (v != static_cast<uint16_t>(MsgKind::kRawBytes)) {
      EXPECT_TRUE(sampled.count(static_cast<uint16_t>(v)))
          << kind_name(static_cast<MsgKind>(v)) << " has no sample in message_samples.h";
    }
    EXPECT_LT(v, 32768u) << "MPI guarantees tags up to 32767 only";
    const std::string name = kind_name(static_cast<MsgKind>(v));
    EXPECT_TRUE(names.insert(name).second) << name;
    EXPECT_EQ(name.find("kind "), std::string::npos) << name;
  }
  EXPECT_EQ(known, static_cast<int>(sampled.size()) + 1);  // + RawBytes
  EXPECT_EQ(kind_name(static_cast<MsgKind>(777)), "kind 777");
}

TEST(Protocol, EveryMessageRoundTripsFieldForField) {
  int checked = 0;
  std::apply(
      [&](const auto&... msg) {
        auto one = [&](const auto& m) {
          using T = std::decay_t<decltype(m)>;
          const std::vector<std::byte> frame = encode_frame(m);
          const WireHeader h = header_of(frame);
          EXPECT_EQ(h.magic, kWireMagic);
          EXPECT_EQ(h.version, kProtocolVersion);
          EXPECT_EQ(h.kind, static_cast<uint16_t>(T::kKind));
          EXPECT_EQ(h.payload_bytes, frame.size() - sizeof(WireHeader));
          EXPECT_EQ(h.head_bytes, h.payload_bytes) << "no bulk";
          const T back = decode<T>(envelope_of(frame));
          EXPECT_TRUE(back == m) << kind_name(T::kKind) << " changed in a round trip";
          // The sample differs from a default struct (else the comparison proves little),
          // except for the kinds that have no field.
          if constexpr (!std::is_empty_v<T>) {
            EXPECT_FALSE(back == T{}) << kind_name(T::kKind);
          }
          ++checked;
        };
        (one(msg), ...);
      },
      sample_messages());
  EXPECT_EQ(checked, static_cast<int>(std::tuple_size_v<decltype(sample_messages())>));
}

TEST(Protocol, FeaturesBulkArrivesAlignedAndUnchanged) {
  const Features head{7, 12, 3, 5};
  std::vector<float> rows(15);
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = 0.1f * static_cast<float>(i) - 0.7f;
  const Envelope env = envelope_of(encode_frame(head, as_bytes_of(rows)));
  EXPECT_EQ(decode<Features>(env), head);
  const std::span<const float> got = env.bulk_as<float>();
  ASSERT_EQ(got.size(), rows.size());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(got.data()) % 8, 0u) << "bulk must be 8-aligned";
  EXPECT_EQ(std::memcmp(got.data(), rows.data(), rows.size() * sizeof(float)), 0);
  EXPECT_NE(error_of([&] { env.bulk_as<double>(); }).find("not a whole number of 8-byte"),
            std::string::npos);
}

TEST(Protocol, RawFrameCarriesBytesOnly) {
  const std::vector<uint8_t> data = {1, 2, 3, 250, 0, 9, 7};
  const Envelope env = envelope_of(build_frame(MsgKind::kRawBytes, {}, as_bytes_of(data)));
  EXPECT_EQ(env.header().head_bytes, 0u);
  EXPECT_EQ(env.kind, MsgKind::kRawBytes);
  const std::span<const uint8_t> got = env.bulk_as<uint8_t>();
  EXPECT_EQ(std::vector<uint8_t>(got.begin(), got.end()), data);
}

TEST(Protocol, BadMagicIsNamed) {
  std::vector<std::byte> frame = encode_frame(Ping{1});
  WireHeader h = header_of(frame);
  h.magic = 0x12345678;
  set_header(frame, h);
  EXPECT_EQ(error_of([&] { check_frame(frame, 4); }),
            "bad magic in a frame from rank 4: 0x12345678, expected 0x31445353 (not an ssd "
            "frame, or a rank of the other byte order)");
}

TEST(Protocol, VersionMismatchNamesBothVersions) {
  std::vector<std::byte> frame = encode_frame(Outcome{});
  WireHeader h = header_of(frame);
  h.version = kProtocolVersion + 1;
  set_header(frame, h);
  const Envelope env = envelope_of(frame, 2);  // receipt does not judge the version...
  EXPECT_EQ(error_of([&] { decode<Outcome>(env); }),  // ...decoding does
            fmt::format("protocol version mismatch: Outcome from rank 2 has version {}, this "
                        "rank speaks {}",
                        kProtocolVersion + 1, kProtocolVersion));
}

TEST(Protocol, TruncatedFrameIsNamed) {
  std::vector<std::byte> frame = encode_frame(Outcome{3, {SeqOutcome{1, 2, {5, 6}}}});
  const size_t full = frame.size();
  frame.pop_back();
  EXPECT_EQ(error_of([&] { check_frame(frame, 1); }),
            fmt::format("truncated Outcome frame from rank 1: header says {} payload bytes, {} "
                        "arrived",
                        full - 32, full - 33));
  frame.resize(20);
  EXPECT_EQ(error_of([&] { check_frame(frame, 1); }),
            "truncated frame from rank 1: 20 bytes, shorter than the 32-byte header");
}

TEST(Protocol, HeadShorterThanItsFieldsIsNamed) {
  // A consistent frame whose head lost its last bytes (as if the sender's layout were shorter).
  std::vector<std::byte> frame =
      encode_frame(Outcome{3, {SeqOutcome{1, 2, {5, 6}}, SeqOutcome{2, 0, {7}}}});
  frame.resize(frame.size() - 4);
  WireHeader h = header_of(frame);
  h.head_bytes -= 4;
  h.payload_bytes -= 4;
  set_header(frame, h);
  const std::string what = error_of([&] { decode<Outcome>(envelope_of(frame, 6)); });
  EXPECT_EQ(what.rfind("truncated or corrupted Outcome from rank 6", 0), 0u) << what;
}

TEST(Protocol, HeadLongerThanItsFieldsIsNamed) {
  std::vector<std::byte> frame = encode_frame(Ping{5});
  frame.resize(frame.size() + 3);
  WireHeader h = header_of(frame);
  h.head_bytes += 3;
  h.payload_bytes += 3;
  set_header(frame, h);
  EXPECT_EQ(error_of([&] { decode<Ping>(envelope_of(frame, 1)); }),
            "corrupted Ping from rank 1: 3 of its 11 head bytes left after decoding (sender and "
            "receiver disagree on the message layout)");
}

TEST(Protocol, WrongKindIsNamed) {
  const Envelope env = envelope_of(encode_frame(Ping{5}), 2);
  EXPECT_EQ(error_of([&] { decode<Pong>(env); }),
            "unexpected message from rank 2: got Ping, expected Pong");
}

TEST(Protocol, HeadSizeBeyondPayloadIsNamed) {
  std::vector<std::byte> frame = encode_frame(Ping{5});
  WireHeader h = header_of(frame);
  h.head_bytes = 1000;
  set_header(frame, h);
  EXPECT_EQ(error_of([&] { check_frame(frame, 0); }),
            "corrupted Ping frame from rank 0: head of 1000 bytes does not fit 8 payload bytes");
}

}  // namespace
}  // namespace ssd
