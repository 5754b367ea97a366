// What this machine's CPUs are, as hwloc sees them: packages, NUMA nodes, physical cores (each
// with the OS indices of its hardware threads), cache sizes, and the CPUs this process may run on
// right now (its binding, set by mpirun, Slurm, taskset or topology/binding.h). Discovered once
// at start-up; a benchmark prints it with its figures, and the binding helper plans from it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ssd {

struct CpuTopology {
  int packages = 0;
  int numa_nodes = 0;
  std::vector<std::vector<int>> cores;  // [core] OS indices of its hardware threads (PUs)
  int64_t l1d_bytes = 0, l2_bytes = 0, l3_bytes = 0;  // per instance; 0 when unknown
  int l2_instances = 0, l3_instances = 0;
  std::vector<int> bound_cpus;  // OS indices of the PUs this process is bound to now

  int n_cores() const { return static_cast<int>(cores.size()); }
  int n_pus() const;
  // "1 package, 1 NUMA node, 2 cores, 2 hardware threads; L1d 32 KiB, L2 1 MiB x2, ..."
  std::string summary() const;
};

// Reads the topology through hwloc. Throws ssd::Error if hwloc cannot load it.
CpuTopology discover_topology();

}  // namespace ssd
