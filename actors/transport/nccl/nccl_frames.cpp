// Frame split and chunk plan of the NCCL transport (see nccl_frames.h).
#include "actors/transport/nccl/nccl_frames.h"

#include <algorithm>
#include <cstring>

#include "actors/transport/frame.h"
#include "runtime/core/error.h"

namespace ssd {

bool payload_over_nccl(size_t frame_bytes, size_t nccl_min_bytes) {
  return frame_bytes > sizeof(WireHeader) && frame_bytes >= nccl_min_bytes;
}

std::vector<ByteChunk> split_chunks(size_t total, size_t max_chunk) {
  SSD_CHECK(max_chunk > 0, "NCCL staging chunk of 0 bytes");
  std::vector<ByteChunk> out;
  out.reserve((total + max_chunk - 1) / max_chunk);
  for (size_t at = 0; at < total; at += max_chunk)
    out.push_back({at, std::min(max_chunk, total - at)});
  return out;
}

ControlMessage classify_control_message(std::span<const std::byte> msg, int peer) {
  SSD_CHECK(msg.size() >= sizeof(WireHeader),
            "NCCL transport: message of {} bytes from rank {} is shorter than a frame header",
            msg.size(), peer);
  ControlMessage c;
  std::memcpy(&c.header, msg.data(), sizeof(WireHeader));
  SSD_CHECK(c.header.magic == kWireMagic,
            "NCCL transport: bad magic {:#010x} from rank {} (expected {:#010x})", c.header.magic,
            peer, kWireMagic);
  c.payload_follows = msg.size() == sizeof(WireHeader) && c.header.payload_bytes > 0;
  if (!c.payload_follows) check_frame(msg, peer);  // a whole frame: every size agrees
  return c;
}

}  // namespace ssd
