// Frames: how a message struct and its bulk bytes become one contiguous buffer, and back.
// Layout and guarantees are described in protocol.h. Every transport moves whole frames; the
// checks here are the same whatever carried the frame:
//   check_frame()  on receipt: size, magic, payload and head sizes agree with the bytes received;
//   decode<T>()    when a handler reads a message: protocol version, kind == T::kKind, and a head
//                  that decodes to exactly head_bytes (a short or over-long head is an error).
// Every failure throws ssd::Error naming the kind, the peer and the two values that disagree.
#pragma once

#include <cereal/archives/binary.hpp>

#include <cstddef>
#include <cstring>
#include <exception>
#include <span>
#include <streambuf>
#include <vector>

#include "actors/transport/bounded_archive.h"
#include "actors/transport/protocol.h"
#include "runtime/core/error.h"

namespace ssd {

// A received frame: who sent it, its kind, and the whole frame (header included).
struct Envelope {
  int peer = -1;
  MsgKind kind{};
  std::vector<std::byte> bytes;

  WireHeader header() const;               // copy of the header (bytes were checked on receipt)
  std::span<const std::byte> head() const;  // Cereal-encoded head
  std::span<const std::byte> bulk() const;  // raw bytes after the head (8-aligned)
  // The bulk as an array of T; throws when its size is not a multiple of sizeof(T).
  template <class T> std::span<const T> bulk_as() const;
};

// Checks size, magic and internal sizes of a frame received from `peer`; returns its header.
WireHeader check_frame(std::span<const std::byte> frame, int peer);

// Builds a frame (seq = 0; the transport stamps it). head: Cereal bytes, bulk: raw bytes.
std::vector<std::byte> build_frame(MsgKind kind, std::span<const std::byte> head,
                                   std::span<const std::byte> bulk);
// Writes the sequence number into a built frame's header.
void stamp_seq(std::vector<std::byte>& frame, uint64_t seq);

namespace detail {

// std::streambuf appending to a byte vector (Cereal writes through an ostream).
class ByteSink : public std::streambuf {
 public:
  explicit ByteSink(std::vector<std::byte>& out) : out_(out) {}

 protected:
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    const size_t at = out_.size();
    out_.resize(at + static_cast<size_t>(n));
    std::memcpy(out_.data() + at, s, static_cast<size_t>(n));
    return n;
  }
  int_type overflow(int_type c) override {
    if (c != traits_type::eof()) out_.push_back(static_cast<std::byte>(c));
    return c == traits_type::eof() ? traits_type::not_eof(c) : c;
  }

 private:
  std::vector<std::byte>& out_;
};

// Throws the error for a head that failed to decode (names kind, peer, and the cause).
[[noreturn]] void throw_bad_head(const Envelope& env, const char* cause);
[[noreturn]] void throw_trailing_head(const Envelope& env, size_t left);
// Version and kind checks of decode<T>; check_version = false for the frozen Hello/HelloReply.
void check_decodable(const Envelope& env, MsgKind expected, bool check_version);

template <class T> std::vector<std::byte> encode_head(const T& msg) {
  std::vector<std::byte> out;
  ByteSink sink(out);
  std::ostream os(&sink);
  {
    cereal::BinaryOutputArchive ar(os);
    ar(msg);
  }
  return out;
}

// Every head is read through BoundedInputArchive (bounded_archive.h): size prefixes bounded by the
// bytes left, bools and enums checked.
template <class T> T decode_head(const Envelope& env, bool check_version) {
  check_decodable(env, T::kKind, check_version);
  BoundedInputArchive ar(env.head());
  T msg;
  try {
    ar(msg);
  } catch (const std::exception& e) {  // cereal::Exception: truncated, oversized, out of range
    throw_bad_head(env, e.what());
  }
  if (ar.remaining() != 0) throw_trailing_head(env, ar.remaining());
  return msg;
}

}  // namespace detail

// A frame holding `msg` (and optional raw bulk after it).
template <Message T>
std::vector<std::byte> encode_frame(const T& msg, std::span<const std::byte> bulk = {}) {
  return build_frame(T::kKind, detail::encode_head(msg), bulk);
}

// The message in `env`; throws ssd::Error when the version, kind or head is wrong.
template <Message T> T decode(const Envelope& env) { return detail::decode_head<T>(env, true); }

template <class T> std::span<const T> Envelope::bulk_as() const {
  const std::span<const std::byte> b = bulk();
  SSD_CHECK(b.size() % sizeof(T) == 0,
            "{} from rank {}: bulk of {} bytes is not a whole number of {}-byte elements",
            kind_name(kind), peer, b.size(), sizeof(T));
  return {reinterpret_cast<const T*>(b.data()), b.size() / sizeof(T)};
}

// Bytes of a contiguous array, for bulk arguments: as_bytes_of(std::vector<float>{...}).
template <class T> std::span<const std::byte> as_bytes_of(const std::vector<T>& v) {
  return std::as_bytes(std::span<const T>(v));
}

}  // namespace ssd
