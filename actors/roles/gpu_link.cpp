// Transport choice and GPU placement at start-up (see gpu_link.h). The only file outside
// actors/transport/nccl that knows whether NCCL was built.
#include "actors/roles/gpu_link.h"

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>

#include "actors/transport/mpi_check.h"
#include "actors/transport/mpi_collective.h"
#include "actors/transport/mpi_transport.h"
#include "runtime/core/error.h"
#include "topology/device_placement.h"

#if defined(SSD_HAVE_NCCL)
#include "actors/transport/nccl/nccl_collective.h"
#include "actors/transport/nccl/nccl_comm.h"
#include "actors/transport/nccl/nccl_transport.h"
#include "runtime/backend/cuda/cuda_backend.h"
#include <cuda_runtime_api.h>
#endif

namespace ssd {
namespace {

int device_count() {
#if defined(SSD_HAVE_NCCL)
  return cuda_device_count();
#else
  return 0;
#endif
}

void set_device(int device) {
#if defined(SSD_HAVE_NCCL)
  const cudaError_t rc = cudaSetDevice(device);
  SSD_CHECK(rc == cudaSuccess, "cudaSetDevice({}) failed: {}", device, cudaGetErrorString(rc));
#else
  (void)device;
#endif
}

[[maybe_unused]] std::chrono::milliseconds timeout_of(const GpuLinkOptions& o) {
  return std::chrono::milliseconds(static_cast<int64_t>(o.timeout_s * 1000));
}

}  // namespace

bool built_with_nccl() {
#if defined(SSD_HAVE_NCCL)
  return true;
#else
  return false;
#endif
}

std::string resolve_transport(const std::string& flag, bool have_nccl, bool cuda_backend,
                              int device_count, const std::string& shared_gpus) {
  if (flag == "mpi") return "mpi";
  if (flag == "auto")
    return have_nccl && cuda_backend && device_count > 0 && shared_gpus.empty() ? "nccl" : "mpi";
  SSD_CHECK(flag == "nccl", "--transport {}: expected auto, mpi or nccl", flag);
  SSD_CHECK(have_nccl,
            "--transport nccl: this ssd was built without NCCL (configure with -DSSD_CUDA=ON on "
            "a machine with the CUDA toolkit and NCCL)");
  SSD_CHECK(device_count > 0,
            "--transport nccl: this rank sees no GPU (cudaGetDeviceCount found none); use "
            "--transport mpi");
  SSD_CHECK(shared_gpus.empty(),
            "--transport nccl: {}, and NCCL refuses two ranks of one communicator on one GPU; "
            "use --transport mpi (or auto), or --devices to give each rank its own GPU",
            shared_gpus);
  return "nccl";
}

bool agree_cuda_backend(const std::vector<bool>& cuda_of_rank, std::string* note) {
  std::string without;
  bool any = false;
  for (size_t r = 0; r < cuda_of_rank.size(); ++r) {
    if (cuda_of_rank[r]) {
      any = true;
      continue;
    }
    without += fmt::format("{}{}", without.empty() ? "" : ",", r);
  }
  if (without.empty()) return !cuda_of_rank.empty();
  if (any && note)
    *note = fmt::format("auto: rank(s) {} found no CUDA device, so every rank runs on the CPU",
                        without);
  return false;
}

GpuPlacement place_on_gpus(const MpiComm* world, const RankLayout& layout,
                           const GpuLinkOptions& options) {
  // This rank's facts, gathered from every rank so that all reach the same verdict: its node,
  // its device count (asked only when a GPU may be used), its backend, its device choice.
  struct Entry {
    char host[64];
    int device, devices, cuda, failed;
  } mine{};
  gethostname(mine.host, sizeof mine.host - 1);
  const bool may_use_gpu = options.cuda_backend || options.transport == "nccl";
  mine.devices = may_use_gpu ? device_count() : 0;
  mine.cuda = options.cuda_backend ? 1 : 0;
  std::string choose_error;
  try {
    const std::optional<std::vector<int>> list =
        options.devices ? std::optional(parse_device_list(*options.devices)) : std::nullopt;
    mine.device = choose_device(list, layout.rank, layout.world, launcher_local_rank());
  } catch (const Error& e) {
    choose_error = e.what();
    mine.device = -1;
  }
  std::vector<Entry> entries(static_cast<size_t>(layout.world));
  if (world) {
    SSD_MPI_CHECK(MPI_Allgather(&mine, sizeof(Entry), MPI_BYTE, entries.data(), sizeof(Entry),
                                MPI_BYTE, world->get()));
  } else {
    SSD_ASSERT(layout.world == 1);
    entries[0] = mine;
  }

  GpuPlacement p;
  std::vector<bool> cuda_of_rank;
  for (const Entry& e : entries) cuda_of_rank.push_back(e.cuda != 0);
  p.note = options.backend_note;
  p.cuda_backend = agree_cuda_backend(cuda_of_rank, &p.note);
  // Ranks sharing a GPU (allowed by --share-devices; without it the placement check below names
  // them) cannot share an NCCL communicator: auto falls back to MPI, nccl is an error.
  std::string shared;
  if (options.share_devices) {
    std::vector<RankDevice> devs;
    for (int r = 0; r < layout.world; ++r) {
      const Entry& e = entries[static_cast<size_t>(r)];
      devs.push_back({r, std::string(e.host, strnlen(e.host, sizeof e.host)),
                      r < layout.tp ? "target" : "drafter", e.device, e.devices});
    }
    shared = describe_shared_devices(devs);
  }
  // Every rank resolves the transport against the agreed backend; a rank whose answer fails (a
  // node without GPUs under --transport nccl) is named on the others.
  std::string error;
  try {
    p.transport = resolve_transport(options.transport, built_with_nccl(), p.cuda_backend,
                                    mine.devices, shared);
  } catch (const Error& e) {
    error = e.what();
  }
  if (error.empty() && options.transport == "auto" && !shared.empty() && p.cuda_backend &&
      built_with_nccl() && layout.rank == 0)
    std::fprintf(stderr, "ssd: note: --transport auto chose MPI: %s (NCCL needs one GPU per "
                         "rank)\n", shared.c_str());
  const bool use_gpus = p.cuda_backend || options.transport == "nccl";
  if (!use_gpus) {
    if (options.devices && layout.rank == 0)
      std::fprintf(stderr, "ssd: note: --devices ignored (the backend is the CPU and the "
                           "transport MPI: no GPU is used)\n");
    SSD_CHECK(error.empty(), "{}", error);
    return p;
  }
  if (error.empty()) error = choose_error;
  // A second exchange of the per-rank verdicts: which ranks failed, so every rank names them.
  mine.failed = error.empty() ? 0 : 1;
  if (world) {
    SSD_MPI_CHECK(MPI_Allgather(&mine, sizeof(Entry), MPI_BYTE, entries.data(), sizeof(Entry),
                                MPI_BYTE, world->get()));
  } else {
    entries[0] = mine;
  }
  std::vector<RankDevice> ranks;
  std::string failed;
  for (int r = 0; r < layout.world; ++r) {
    const Entry& e = entries[static_cast<size_t>(r)];
    if (e.failed) failed += fmt::format("{}rank {}", failed.empty() ? "" : ", ", r);
    ranks.push_back({r, std::string(e.host, strnlen(e.host, sizeof e.host)),
                     r < layout.tp ? "target" : "drafter", e.device, e.devices});
  }
  SSD_CHECK(error.empty(), "{}", error);
  SSD_CHECK(failed.empty(), "GPU set-up failed on {} (see that rank's message)", failed);
  const std::string problems = check_device_placement(ranks, options.share_devices);
  SSD_CHECK(problems.empty(), "device placement: {}", problems);
  set_device(mine.device);
  p.device = mine.device;
  return p;
}

std::unique_ptr<Transport> make_world_transport(const MpiComm& world, const GpuPlacement& p,
                                                const GpuLinkOptions& options) {
#if defined(SSD_HAVE_NCCL)
  if (p.transport == "nccl")
    return std::make_unique<NcclTransport>(world, NcclTransportOptions{.timeout =
                                                                            timeout_of(options)});
#endif
  (void)options;
  SSD_ASSERT(p.transport == "mpi");
  return std::make_unique<MpiTransport>(world);
}

std::unique_ptr<Collective> make_tp_collective(const MpiComm& tp, const GpuPlacement& p,
                                               const GpuLinkOptions& options) {
#if defined(SSD_HAVE_NCCL)
  if (p.transport == "nccl")
    return std::make_unique<NcclCollective>(
        tp, NcclCollectiveOptions{.order = options.megatron ? ReduceOrder::kNccl
                                                            : ReduceOrder::kRankOrder,
                                  .timeout = timeout_of(options)});
#endif
  (void)options;
  SSD_ASSERT(p.transport == "mpi");
  return std::make_unique<MpiCollective>(tp);
}

}  // namespace ssd
