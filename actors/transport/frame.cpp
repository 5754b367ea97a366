// Frame building and the receipt/decode checks (see frame.h).
#include "actors/transport/frame.h"

#include <fmt/format.h>

#include <algorithm>

namespace ssd {
namespace {

WireHeader read_header(std::span<const std::byte> frame) {
  WireHeader h;
  std::memcpy(&h, frame.data(), sizeof h);
  return h;
}

}  // namespace

WireHeader Envelope::header() const {
  SSD_ASSERT(bytes.size() >= sizeof(WireHeader));
  return read_header(bytes);
}

std::span<const std::byte> Envelope::head() const {
  const WireHeader h = header();
  return std::span<const std::byte>(bytes).subspan(sizeof(WireHeader), h.head_bytes);
}

std::span<const std::byte> Envelope::bulk() const {
  const WireHeader h = header();
  if (h.head_bytes == 0) return std::span<const std::byte>(bytes).subspan(sizeof(WireHeader));
  if (h.payload_bytes == h.head_bytes) return {};  // a head and no bulk
  return std::span<const std::byte>(bytes).subspan(bulk_offset(h.head_bytes));
}

WireHeader check_frame(std::span<const std::byte> frame, int peer) {
  SSD_CHECK(frame.size() >= sizeof(WireHeader),
            "truncated frame from rank {}: {} bytes, shorter than the {}-byte header", peer,
            frame.size(), sizeof(WireHeader));
  const WireHeader h = read_header(frame);
  SSD_CHECK(h.magic == kWireMagic,
            "bad magic in a frame from rank {}: {:#010x}, expected {:#010x} (not an ssd frame, "
            "or a rank of the other byte order)",
            peer, h.magic, kWireMagic);
  const uint64_t payload = frame.size() - sizeof(WireHeader);
  SSD_CHECK(h.payload_bytes == payload,
            "truncated {} frame from rank {}: header says {} payload bytes, {} arrived",
            kind_name(static_cast<MsgKind>(h.kind)), peer, h.payload_bytes, payload);
  // Either no head, or a head alone, or a head, its padding and a bulk.
  SSD_CHECK(h.head_bytes <= payload && (h.head_bytes == 0 || payload == h.head_bytes ||
                                         bulk_offset(h.head_bytes) <= frame.size()),
            "corrupted {} frame from rank {}: head of {} bytes does not fit {} payload bytes",
            kind_name(static_cast<MsgKind>(h.kind)), peer, h.head_bytes, payload);
  return h;
}

std::vector<std::byte> build_frame(MsgKind kind, std::span<const std::byte> head,
                                   std::span<const std::byte> bulk) {
  SSD_CHECK(head.size() <= UINT32_MAX, "{} head of {} bytes is larger than a frame allows",
            kind_name(kind), head.size());
  SSD_CHECK(bulk_offset(head.size()) + bulk.size() <= kMaxFrameBytes,
            "{} of {} head and {} bulk bytes is larger than a frame allows ({} bytes)",
            kind_name(kind), head.size(), bulk.size(), kMaxFrameBytes);
  WireHeader h;
  h.kind = static_cast<uint16_t>(kind);
  h.head_bytes = static_cast<uint32_t>(head.size());
  // A frame with no head starts its bulk right after the header; otherwise 8-aligned after it.
  const uint64_t at = head.empty() ? sizeof(WireHeader) : bulk_offset(head.size());
  const uint64_t total = bulk.empty() ? sizeof(WireHeader) + head.size() : at + bulk.size();
  h.payload_bytes = total - sizeof(WireHeader);
  std::vector<std::byte> frame(total);
  std::byte* out = frame.data();
  std::memcpy(out, &h, sizeof h);
  if (!head.empty()) std::memcpy(out + sizeof(WireHeader), head.data(), head.size());
  if (!bulk.empty()) std::memcpy(out + at, bulk.data(), bulk.size());
  return frame;
}

void stamp_seq(std::vector<std::byte>& frame, uint64_t seq) {
  SSD_ASSERT(frame.size() >= sizeof(WireHeader));
  std::memcpy(frame.data() + offsetof(WireHeader, seq), &seq, sizeof seq);
}

namespace detail {

void check_decodable(const Envelope& env, MsgKind expected, bool check_version) {
  const WireHeader h = check_frame(env.bytes, env.peer);
  SSD_CHECK(!check_version || h.version == kProtocolVersion,
            "protocol version mismatch: {} from rank {} has version {}, this rank speaks {}",
            kind_name(env.kind), env.peer, h.version, kProtocolVersion);
  SSD_CHECK(h.kind == static_cast<uint16_t>(expected),
            "unexpected message from rank {}: got {}, expected {}", env.peer,
            kind_name(static_cast<MsgKind>(h.kind)), kind_name(expected));
}

void throw_bad_head(const Envelope& env, const char* cause) {
  fail(fmt::format("truncated or corrupted {} from rank {} ({} head bytes): {}",
                   kind_name(env.kind), env.peer, env.header().head_bytes, cause));
}

void throw_trailing_head(const Envelope& env, size_t left) {
  fail(fmt::format("corrupted {} from rank {}: {} of its {} head bytes left after decoding "
                   "(sender and receiver disagree on the message layout)",
                   kind_name(env.kind), env.peer, left, env.header().head_bytes));
}

}  // namespace detail
}  // namespace ssd
