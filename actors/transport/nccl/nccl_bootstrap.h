// Bootstrapping NCCL communicators from MPI: the root of a group calls ncclGetUniqueId once per
// communicator it needs, packs the ids into one buffer and broadcasts it over the group's MPI
// communicator; every rank unpacks and checks the buffer before handing an id to
// ncclCommInitRankConfig. The packed layout is this project's (NCCL's id is 128 opaque bytes):
//   magic u32 "SNID" | version u16 | count u16 | count x NCCL_UNIQUE_ID_BYTES
// so a rank built against another NCCL id size, or a truncated broadcast, is an error that says
// so, not a communicator that never forms.
#pragma once

#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "actors/transport/mpi_world.h"

namespace ssd {

inline constexpr uint32_t kNcclIdMagic = 0x44494e53;  // "SNID" in memory (little-endian)
inline constexpr uint16_t kNcclIdVersion = 1;
inline constexpr size_t kNcclIdHeaderBytes = 8;
static_assert(sizeof(ncclUniqueId) == NCCL_UNIQUE_ID_BYTES, "ncclUniqueId is its bytes");

std::vector<std::byte> pack_unique_ids(std::span<const ncclUniqueId> ids);
// Throws ssd::Error naming what disagrees (size, magic, version, count).
std::vector<ncclUniqueId> unpack_unique_ids(std::span<const std::byte> bytes, size_t expect_count);

// Collective over `comm`: `root` creates `count` ids (ncclGetUniqueId) and every rank returns
// them, in the same order.
std::vector<ncclUniqueId> broadcast_unique_ids(const MpiComm& comm, int root, size_t count);

}  // namespace ssd
