// Which GPU each rank uses, decided once at start-up and checked on every rank before any model
// is loaded. Pure logic (no CUDA call): the device count of each node is given, so the rules are
// tested without a GPU.
//
//   --devices 0,1,2,3,4   device of each global rank (one entry per rank of the job)
//   default               the rank's local rank on its node (OMPI_COMM_WORLD_LOCAL_RANK,
//                         SLURM_LOCALID, MPI_LOCALRANKID; 0 when none is set)
// Rules: a device index must be < the node's device count; no two ranks of one node may use one
// device (two target shards, or a target and the drafter, would share its memory and SMs) unless
// --share-devices. A violation is one message naming every rank involved.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ssd {

// "0,1,2,3,4" -> {0,1,2,3,4}; throws ssd::Error naming the bad entry (empty, not a number,
// negative).
std::vector<int> parse_device_list(std::string_view text);

// The local rank the launcher gave this process (see above); 0 when no launcher variable is set.
int launcher_local_rank();

// Device of `world_rank`: list[world_rank] when a list is given (throws unless the list has one
// entry per rank), else local_rank.
int choose_device(const std::optional<std::vector<int>>& list, int world_rank, int world_size,
                  int local_rank);

struct RankDevice {
  int rank = 0;              // global rank
  std::string host;          // node name
  std::string role;          // "target" / "drafter"
  int device = 0;            // chosen device index on that node
  int node_devices = 0;      // GPUs that node's process sees
};

// "" when the placement is valid, else one message naming every problem.
std::string check_device_placement(const std::vector<RankDevice>& ranks, bool share_devices);

// "" when no two ranks use one device of one node, else one phrase naming, for each shared
// device, its ranks and the device ("ranks 0 (target), 4 (drafter) share GPU 0 on node-1").
// Ranks with no valid device (past the node's count, none seen) are left out. What the
// transport choice needs: NCCL refuses two ranks of one communicator on one GPU.
std::string describe_shared_devices(const std::vector<RankDevice>& ranks);

}  // namespace ssd
