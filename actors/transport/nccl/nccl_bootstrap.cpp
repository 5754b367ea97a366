// Unique-id packing and its MPI broadcast (see nccl_bootstrap.h).
#include "actors/transport/nccl/nccl_bootstrap.h"

#include <cstring>

#include "actors/transport/mpi_check.h"
#include "actors/transport/nccl/nccl_check.h"
#include "runtime/core/error.h"

namespace ssd {

std::vector<std::byte> pack_unique_ids(std::span<const ncclUniqueId> ids) {
  SSD_CHECK(ids.size() <= UINT16_MAX, "{} NCCL unique ids do not fit one bootstrap buffer",
            ids.size());
  std::vector<std::byte> out(kNcclIdHeaderBytes + ids.size() * sizeof(ncclUniqueId));
  const uint16_t count = static_cast<uint16_t>(ids.size());
  std::memcpy(out.data(), &kNcclIdMagic, 4);
  std::memcpy(out.data() + 4, &kNcclIdVersion, 2);
  std::memcpy(out.data() + 6, &count, 2);
  if (!ids.empty())
    std::memcpy(out.data() + kNcclIdHeaderBytes, ids.data(), ids.size() * sizeof(ncclUniqueId));
  return out;
}

std::vector<ncclUniqueId> unpack_unique_ids(std::span<const std::byte> bytes,
                                            size_t expect_count) {
  SSD_CHECK(bytes.size() >= kNcclIdHeaderBytes,
            "NCCL bootstrap buffer of {} bytes is shorter than its {}-byte header", bytes.size(),
            kNcclIdHeaderBytes);
  uint32_t magic = 0;
  uint16_t version = 0, count = 0;
  std::memcpy(&magic, bytes.data(), 4);
  std::memcpy(&version, bytes.data() + 4, 2);
  std::memcpy(&count, bytes.data() + 6, 2);
  SSD_CHECK(magic == kNcclIdMagic, "NCCL bootstrap buffer has magic {:#010x}, expected {:#010x}",
            magic, kNcclIdMagic);
  SSD_CHECK(version == kNcclIdVersion, "NCCL bootstrap buffer has version {}, this rank reads {}",
            version, kNcclIdVersion);
  SSD_CHECK(count == expect_count, "NCCL bootstrap buffer holds {} unique id(s), expected {}",
            count, expect_count);
  const size_t want = kNcclIdHeaderBytes + size_t{count} * sizeof(ncclUniqueId);
  SSD_CHECK(bytes.size() == want,
            "NCCL bootstrap buffer of {} bytes for {} id(s) of {} bytes: expected {} bytes (ranks "
            "built against NCCLs with different id sizes?)",
            bytes.size(), count, sizeof(ncclUniqueId), want);
  std::vector<ncclUniqueId> ids(count);
  if (count > 0)
    std::memcpy(ids.data(), bytes.data() + kNcclIdHeaderBytes, count * sizeof(ncclUniqueId));
  return ids;
}

std::vector<ncclUniqueId> broadcast_unique_ids(const MpiComm& comm, int root, size_t count) {
  std::vector<std::byte> buf;
  if (comm.rank() == root) {
    std::vector<ncclUniqueId> ids(count);
    for (ncclUniqueId& id : ids) SSD_NCCL_CHECK(ncclGetUniqueId(&id));
    buf = pack_unique_ids(ids);
  }
  // Size first, so a rank built with another layout reads a size it can check.
  uint64_t n = buf.size();
  SSD_MPI_CHECK(MPI_Bcast(&n, 1, MPI_UINT64_T, root, comm.get()));
  SSD_CHECK(n <= (size_t{1} << 24), "NCCL bootstrap buffer of {} bytes is implausible", n);
  buf.resize(n);
  SSD_MPI_CHECK(MPI_Bcast(buf.data(), static_cast<int>(n), MPI_BYTE, root, comm.get()));
  return unpack_unique_ids(buf, count);
}

}  // namespace ssd
