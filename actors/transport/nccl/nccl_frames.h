// How NcclTransport moves a frame (protocol.h), as pure functions the tests check without a GPU.
//
// Every frame's 32-byte WireHeader travels over MPI first: it names the kind (the MPI tag, as in
// MpiTransport), the sequence number and payload_bytes, i.e. it is the size prefix. A frame
// smaller than `nccl_min_bytes` goes whole in that MPI message (control messages are a few hundred
// bytes, where a CUDA copy + NCCL kernel would cost more than MPI). A larger frame sends the header
// alone over MPI and its payload over the NCCL lane from sender to receiver, in chunks of at most
// the lane's staging buffer; both sides derive the same chunk list from payload_bytes, so every
// ncclSend has its ncclRecv of the same size, in the same order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "actors/transport/protocol.h"

namespace ssd {

// True when a frame of `frame_bytes` sends its payload over NCCL.
bool payload_over_nccl(size_t frame_bytes, size_t nccl_min_bytes);

struct ByteChunk {
  size_t offset = 0;
  size_t bytes = 0;
  friend bool operator==(const ByteChunk&, const ByteChunk&) = default;
};
// [0, total) in consecutive chunks of max_chunk bytes (the last one shorter); none for 0.
std::vector<ByteChunk> split_chunks(size_t total, size_t max_chunk);

// What an MPI message of the NCCL transport holds: a whole frame, or a header whose payload
// follows over NCCL. Throws ssd::Error (naming the peer) for a message that is neither.
struct ControlMessage {
  WireHeader header;
  bool payload_follows = false;  // true: header alone; payload_bytes arrive over NCCL
};
ControlMessage classify_control_message(std::span<const std::byte> msg, int peer);

}  // namespace ssd
