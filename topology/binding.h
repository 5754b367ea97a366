// Rank-to-core binding when several ranks share a machine. Each MPI rank learns its place among
// the ranks of its node from the launcher's environment (Open MPI: OMPI_COMM_WORLD_LOCAL_RANK /
// _LOCAL_SIZE; also MPI_LOCALRANKID / MPI_LOCALNRANKS of MPICH and SLURM_LOCALID /
// SLURM_NTASKS_PER_NODE), and the machine's cores are split into local_size contiguous groups,
// group local_rank being this rank's: its compute threads then never compete with a peer's.
//
// Policy (bind_local_rank): nothing is done for a lone rank, and nothing when the launcher or
// the user already restricted this process (its binding is not the whole machine): an explicit
// binding wins. Otherwise the process (all its threads, present and future) is bound to its
// cores with hwloc. With more ranks than cores, rank r gets core r mod cores.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "topology/topology.h"

namespace ssd {

struct LocalRank {
  int rank = 0;  // 0 .. size-1 among the ranks on this machine
  int size = 1;
};

// From the environment; nullopt when no launcher variable is set (not under mpirun / srun).
std::optional<LocalRank> local_rank_from_env();

// The OS CPU indices (every hardware thread of the cores) of group `r.rank` out of `r.size`.
std::vector<int> cpus_for_local_rank(const CpuTopology& topo, const LocalRank& r);

struct BindResult {
  bool bound = false;     // this call changed the process's binding
  std::vector<int> cpus;  // the CPUs this process runs on afterwards
  std::string note;       // one line saying what was decided and why
};

// Applies the policy above for `r` (by default from the environment).
BindResult bind_local_rank(const CpuTopology& topo, std::optional<LocalRank> r);
BindResult bind_local_rank_from_env();

}  // namespace ssd
