// Rank-to-core binding through hwloc (see binding.h for the policy).
#include "topology/binding.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <hwloc.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "runtime/core/error.h"

namespace ssd {
namespace {

std::optional<int> env_int(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  SSD_CHECK(end && *end == '\0' && x >= 0 && x < (1 << 20),
            "environment variable {}='{}' is not a rank number", name, v);
  return static_cast<int>(x);
}

}  // namespace

std::optional<LocalRank> local_rank_from_env() {
  const char* pairs[][2] = {{"OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"},
                            {"MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
                            {"SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"}};
  for (const auto& p : pairs) {
    const auto rank = env_int(p[0]);
    const auto size = env_int(p[1]);
    if (!rank || !size) continue;
    SSD_CHECK(*size >= 1 && *rank < *size, "{}={} is not below {}={}", p[0], *rank, p[1], *size);
    return LocalRank{*rank, *size};
  }
  return std::nullopt;
}

std::vector<int> cpus_for_local_rank(const CpuTopology& topo, const LocalRank& r) {
  const int cores = topo.n_cores();
  SSD_CHECK(cores > 0, "binding: the topology lists no cores");
  SSD_CHECK(r.size >= 1 && r.rank >= 0 && r.rank < r.size, "binding: local rank {} of {}", r.rank,
            r.size);
  std::vector<int> cpus;
  auto take = [&](int core) {
    const auto& pus = topo.cores[static_cast<size_t>(core)];
    cpus.insert(cpus.end(), pus.begin(), pus.end());
  };
  if (r.size > cores) {
    take(r.rank % cores);
  } else {
    const int64_t begin = int64_t{cores} * r.rank / r.size;
    const int64_t end = int64_t{cores} * (r.rank + 1) / r.size;
    for (int64_t c = begin; c < end; ++c) take(static_cast<int>(c));
  }
  std::sort(cpus.begin(), cpus.end());
  return cpus;
}

BindResult bind_local_rank(const CpuTopology& topo, std::optional<LocalRank> r) {
  BindResult res;
  res.cpus = topo.bound_cpus;
  if (!r || r->size <= 1) {
    res.note = "single rank on this machine: threads not bound";
    return res;
  }
  if (static_cast<int>(topo.bound_cpus.size()) < topo.n_pus()) {
    res.note = fmt::format("local rank {} of {}: keeping the binding set by the launcher (CPUs {})",
                           r->rank, r->size, fmt::join(topo.bound_cpus, ","));
    return res;
  }
  const std::vector<int> cpus = cpus_for_local_rank(topo, *r);
  hwloc_topology_t t = nullptr;
  SSD_CHECK(hwloc_topology_init(&t) == 0 && hwloc_topology_load(t) == 0,
            "hwloc: cannot load this machine's topology");
  hwloc_bitmap_t set = hwloc_bitmap_alloc();
  for (int c : cpus) hwloc_bitmap_set(set, static_cast<unsigned>(c));
  const int rc = hwloc_set_cpubind(t, set, HWLOC_CPUBIND_PROCESS);
  hwloc_bitmap_free(set);
  hwloc_topology_destroy(t);
  if (rc != 0) {
    res.note = fmt::format("local rank {} of {}: binding to CPUs {} refused by the OS; unbound",
                           r->rank, r->size, fmt::join(cpus, ","));
    return res;
  }
  res.bound = true;
  res.cpus = cpus;
  res.note = fmt::format("local rank {} of {}: bound to CPUs {}", r->rank, r->size,
                         fmt::join(cpus, ","));
  return res;
}

BindResult bind_local_rank_from_env() {
  const std::optional<LocalRank> r = local_rank_from_env();
  if (!r || r->size <= 1)
    return BindResult{false, {}, "single rank on this machine: threads not bound"};
  return bind_local_rank(discover_topology(), r);
}

}  // namespace ssd
