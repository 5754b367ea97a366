// `ssd topo`: this node as a run would use it: packages, NUMA nodes, cores and caches (hwloc),
// the GPUs and the links between them (NVML, loaded only if present), and where each rank of a
// layout would sit: its role and the cores (or GPU) the binding policy gives it on this node.
#pragma once

namespace ssd {

int run_topo_command(int argc, const char* const* argv);

}  // namespace ssd
