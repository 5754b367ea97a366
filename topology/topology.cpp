// hwloc discovery. The hwloc topology object lives only inside discover_topology(): what the
// runtime needs is copied into plain vectors, so no other file includes hwloc.h.
#include "topology/topology.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <hwloc.h>

#include "runtime/core/error.h"

namespace ssd {
namespace {

std::vector<int> cpus_of(hwloc_const_bitmap_t set) {
  std::vector<int> out;
  for (int i = hwloc_bitmap_first(set); i >= 0; i = hwloc_bitmap_next(set, i)) out.push_back(i);
  return out;
}

std::string bytes_text(int64_t b) {
  if (b >= (int64_t{1} << 20) && b % (int64_t{1} << 20) == 0) return fmt::format("{} MiB", b >> 20);
  if (b >= (int64_t{1} << 20)) return fmt::format("{:.1f} MiB", static_cast<double>(b) / (1 << 20));
  return fmt::format("{} KiB", b >> 10);
}

// hwloc handles released on every path.
struct Topo {
  hwloc_topology_t t = nullptr;
  ~Topo() {
    if (t) hwloc_topology_destroy(t);
  }
};
struct Bitmap {
  hwloc_bitmap_t b = hwloc_bitmap_alloc();
  ~Bitmap() { hwloc_bitmap_free(b); }
};

}  // namespace

int CpuTopology::n_pus() const {
  int n = 0;
  for (const auto& c : cores) n += static_cast<int>(c.size());
  return n;
}

std::string CpuTopology::summary() const {
  std::string s = fmt::format("{} package{}, {} NUMA node{}, {} cores, {} hardware threads",
                              packages, packages == 1 ? "" : "s", numa_nodes,
                              numa_nodes == 1 ? "" : "s", n_cores(), n_pus());
  if (l1d_bytes) s += fmt::format("; L1d {}", bytes_text(l1d_bytes));
  if (l2_bytes) s += fmt::format(", L2 {} x{}", bytes_text(l2_bytes), l2_instances);
  if (l3_bytes) s += fmt::format(", L3 {} x{}", bytes_text(l3_bytes), l3_instances);
  if (!bound_cpus.empty()) s += fmt::format("; bound to CPUs {}", fmt::join(bound_cpus, ","));
  return s;
}

CpuTopology discover_topology() {
  Topo topo;
  SSD_CHECK(hwloc_topology_init(&topo.t) == 0, "hwloc: cannot initialise a topology");
  SSD_CHECK(hwloc_topology_load(topo.t) == 0, "hwloc: cannot load this machine's topology");
  CpuTopology out;
  out.packages = hwloc_get_nbobjs_by_type(topo.t, HWLOC_OBJ_PACKAGE);
  out.numa_nodes = hwloc_get_nbobjs_by_type(topo.t, HWLOC_OBJ_NUMANODE);
  const int n_cores = hwloc_get_nbobjs_by_type(topo.t, HWLOC_OBJ_CORE);
  for (int i = 0; i < n_cores; ++i)
    out.cores.push_back(cpus_of(hwloc_get_obj_by_type(topo.t, HWLOC_OBJ_CORE, i)->cpuset));
  if (out.cores.empty()) {  // some virtual machines report PUs only: one core per PU
    const int n_pus = hwloc_get_nbobjs_by_type(topo.t, HWLOC_OBJ_PU);
    for (int i = 0; i < n_pus; ++i)
      out.cores.push_back(
          {static_cast<int>(hwloc_get_obj_by_type(topo.t, HWLOC_OBJ_PU, i)->os_index)});
  }
  auto cache = [&](hwloc_obj_type_t type, int64_t& bytes, int* count) {
    const int n = hwloc_get_nbobjs_by_type(topo.t, type);
    if (count) *count = n;
    if (n > 0)
      bytes = static_cast<int64_t>(hwloc_get_obj_by_type(topo.t, type, 0)->attr->cache.size);
  };
  cache(HWLOC_OBJ_L1CACHE, out.l1d_bytes, nullptr);
  cache(HWLOC_OBJ_L2CACHE, out.l2_bytes, &out.l2_instances);
  cache(HWLOC_OBJ_L3CACHE, out.l3_bytes, &out.l3_instances);
  Bitmap bound;
  if (hwloc_get_cpubind(topo.t, bound.b, HWLOC_CPUBIND_PROCESS) == 0)
    out.bound_cpus = cpus_of(bound.b);
  return out;
}

}  // namespace ssd
