// The GPU side of joining a job, kept in this one shim so no other call site needs #if: which
// transport carries the leader <-> drafter link and which collective the TP group uses (MPI, or
// NCCL when this binary was built with it), and which GPU this rank uses (device placement,
// topology/device_placement.h), checked on every rank at start-up.
//
//   --transport auto   NCCL when built with NCCL and the backend is CUDA, else MPI; MPI also
//                      when two ranks share a GPU (--share-devices), for the drafter link and
//                      the TP group alike: NCCL refuses two ranks of one communicator on one
//                      GPU ("Duplicate GPU detected"), and the world communicator holds every rank
//   --transport mpi    always MPI
//   --transport nccl   NCCL; an error (one line, non-zero exit) on a binary without NCCL, a
//                      rank that sees no GPU, or ranks sharing a GPU (naming them and the GPU)
// GPUs are placed (and the placement checked: a device past the node's count, two ranks on one
// device without --share-devices) when the backend is CUDA or the transport is NCCL; otherwise a
// --devices flag is ignored with a note on stderr.
//
// The backend is agreed here too: each rank resolves --backend on its own node first (a rank
// without a device fails `--backend cuda` there, before MPI starts); the job then computes on
// CUDA only when every rank resolved CUDA. Under `--backend auto` a job whose ranks disagree (a
// node without GPUs) runs every rank on the CPU, with a note naming the ranks: the transport,
// the TP group's arithmetic and the drafter link all need one answer for the whole job.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "actors/transport/emulated_link.h"
#include "actors/transport/mpi_world.h"
#include "actors/transport/transport.h"
#include "runtime/parallel/collective.h"

namespace ssd {

struct GpuLinkOptions {
  std::string transport = "auto";      // auto | mpi | nccl
  std::optional<std::string> devices;  // --devices list, one per global rank
  bool share_devices = false;
  bool cuda_backend = false;           // this rank resolved --backend to CUDA
  std::string backend_note;            // why this rank's --backend auto chose the CPU ("" if not)
  bool megatron = false;               // --tp-mode megatron: NCCL's own all-reduce order is fine
  double timeout_s = 120;              // NCCL set-up and any one NCCL wait
  LinkEmulation link;                  // --link-emulate: delays on target<->drafter frames
};

// True when this binary has the NCCL transport (SSD_HAVE_NCCL).
bool built_with_nccl();

// "mpi" or "nccl" for the flag value; throws ssd::Error for nccl without NCCL in the binary,
// without a GPU, or with a shared GPU. shared_gpus: describe_shared_devices of the job's
// placement ("" when every rank has its own GPU). Pure (device_count given), tested.
std::string resolve_transport(const std::string& flag, bool have_nccl, bool cuda_backend,
                              int device_count, const std::string& shared_gpus = "");

// The job's backend from every rank's own resolution (cuda_of_rank[r]: rank r resolved CUDA):
// CUDA only when all did. Sets *note when some did and others did not (which ranks had no
// device), else leaves it alone. Pure, tested.
bool agree_cuda_backend(const std::vector<bool>& cuda_of_rank, std::string* note);

struct GpuPlacement {
  std::string transport = "mpi";
  bool cuda_backend = false;  // the job computes on CUDA (every rank agreed, see above)
  int device = -1;            // this rank's CUDA device, -1 when no GPU is used
  std::string note;           // why --backend auto runs this rank on the CPU ("" otherwise)
};

// Collective over `world` (every rank of the job; null for a process started by hand, a world
// of one with no MPI call): agrees on the backend, resolves the transport, chooses and checks
// every rank's device (the same verdict on every rank), and makes it this process's current
// device. Throws ssd::Error with the placement problems.
GpuPlacement place_on_gpus(const MpiComm* world, const RankLayout& layout,
                           const GpuLinkOptions& options);

// The world transport and the TP collective for the placement (collective over their groups).
std::unique_ptr<Transport> make_world_transport(const MpiComm& world, const GpuPlacement& p,
                                                const GpuLinkOptions& options);
std::unique_ptr<Collective> make_tp_collective(const MpiComm& tp, const GpuPlacement& p,
                                               const GpuLinkOptions& options);

}  // namespace ssd
