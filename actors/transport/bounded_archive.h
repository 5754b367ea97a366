// The one input archive every message head is decoded with: Cereal's binary layout (what
// cereal::BinaryOutputArchive writes), read from a byte span that it never reads past, and that
// never lets a peer's numbers decide an allocation.
//
// Why not cereal::BinaryInputArchive: it resizes a container to the size prefix it reads before
// reading the elements, so a 20-byte head claiming 2^31 tokens allocates (and zero-fills) 8 GiB
// before failing as truncated, and a claim of 2^31 structs ends in bad_alloc. Here:
//   - a size prefix (SizeTag: vectors, strings) may not exceed the bytes left in the head (every
//     element of every message takes at least one byte on the wire), so a container's allocation
//     is bounded by a small multiple of the bytes that actually arrived;
//   - a bool must be 0 or 1 on the wire (another value is a corrupted head, and loading it into a
//     bool would be undefined behaviour);
//   - enums go through WireEnum (protocol.h), which checks the value against the enumerators.
// Every failure throws cereal::Exception; frame.h turns it into an ssd::Error naming the kind and
// the peer. New message kinds get all of this by being decoded through frame.h's decode<T>().
#pragma once

#include <cereal/archives/binary.hpp>
#include <cereal/cereal.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <type_traits>

namespace ssd {

class BoundedInputArchive
    : public cereal::InputArchive<BoundedInputArchive, cereal::AllowEmptyClassElision> {
 public:
  explicit BoundedInputArchive(std::span<const std::byte> in)
      : cereal::InputArchive<BoundedInputArchive, cereal::AllowEmptyClassElision>(this),
        in_(in) {}

  // Copies `size` bytes out of the head; throws when fewer are left.
  void loadBinary(void* data, std::size_t size) {
    if (size > remaining())
      throw cereal::Exception("truncated: " + std::to_string(size) + " bytes wanted, " +
                              std::to_string(remaining()) + " left");
    if (size > 0) std::memcpy(data, in_.data() + at_, size);
    at_ += size;
  }
  std::size_t remaining() const { return in_.size() - at_; }

  // A container of `n` elements is about to be read: n may not exceed the bytes left.
  void check_size_prefix(uint64_t n) const {
    if (n > remaining())
      throw cereal::Exception("a size prefix of " + std::to_string(n) +
                              " elements exceeds the " + std::to_string(remaining()) +
                              " bytes left in the head");
  }

 private:
  std::span<const std::byte> in_;
  std::size_t at_ = 0;
};

template <class T>
inline std::enable_if_t<std::is_arithmetic_v<T>> CEREAL_LOAD_FUNCTION_NAME(BoundedInputArchive& ar,
                                                                          T& t) {
  if constexpr (std::is_same_v<T, bool>) {
    uint8_t b = 0;
    ar.loadBinary(&b, 1);
    if (b > 1) throw cereal::Exception("a bool holds " + std::to_string(b) + ", not 0 or 1");
    t = b != 0;
  } else {
    ar.loadBinary(std::addressof(t), sizeof(t));
  }
}

template <class T>
inline void CEREAL_SERIALIZE_FUNCTION_NAME(BoundedInputArchive& ar, cereal::NameValuePair<T>& t) {
  ar(t.value);
}

template <class T>
inline void CEREAL_SERIALIZE_FUNCTION_NAME(BoundedInputArchive& ar, cereal::SizeTag<T>& t) {
  ar(t.size);
  ar.check_size_prefix(static_cast<uint64_t>(t.size));
}

template <class T>
inline void CEREAL_LOAD_FUNCTION_NAME(BoundedInputArchive& ar, cereal::BinaryData<T>& bd) {
  ar.loadBinary(bd.data, static_cast<std::size_t>(bd.size));
}

}  // namespace ssd

CEREAL_REGISTER_ARCHIVE(ssd::BoundedInputArchive)
// Reads what BinaryOutputArchive writes (only this direction: BinaryOutputArchive's own input
// archive stays cereal::BinaryInputArchive).
namespace cereal::traits::detail {
template <> struct get_output_from_input<ssd::BoundedInputArchive> {
  using type = cereal::BinaryOutputArchive;
};
}  // namespace cereal::traits::detail
