// Topology discovery on this machine (sane counts, the process bound to CPUs that exist) and the
// binding plan on hand-made topologies: contiguous core groups per local rank that cover every
// core once, all hardware threads of a core kept together, more ranks than cores wrapping
// around, the launcher's environment parsed (and a bad value rejected), and a binding set by the
// launcher kept as it is.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <set>

#include "runtime/core/error.h"
#include "topology/binding.h"
#include "topology/topology.h"

namespace ssd {
namespace {

CpuTopology fake(int cores, int threads_per_core) {
  CpuTopology t;
  t.packages = 1;
  t.numa_nodes = 1;
  for (int c = 0; c < cores; ++c) {
    std::vector<int> pus;
    for (int h = 0; h < threads_per_core; ++h) pus.push_back(c + h * cores);  // Linux numbering
    t.cores.push_back(pus);
  }
  for (int p = 0; p < cores * threads_per_core; ++p) t.bound_cpus.push_back(p);
  return t;
}

TEST(Topology, DiscoversThisMachine) {
  const CpuTopology t = discover_topology();
  EXPECT_GE(t.packages, 1);
  EXPECT_GE(t.n_cores(), 1);
  EXPECT_GE(t.n_pus(), t.n_cores());
  std::set<int> all;
  for (const auto& c : t.cores) all.insert(c.begin(), c.end());
  ASSERT_FALSE(t.bound_cpus.empty());
  for (int cpu : t.bound_cpus) EXPECT_TRUE(all.count(cpu)) << cpu;
  EXPECT_NE(t.summary().find("cores"), std::string::npos);
}

TEST(Binding, GroupsCoverEveryCoreOnce) {
  for (int cores : {1, 2, 6, 7}) {
    for (int size = 1; size <= cores; ++size) {
      const CpuTopology t = fake(cores, 2);
      std::multiset<int> seen;
      for (int r = 0; r < size; ++r) {
        const auto cpus = cpus_for_local_rank(t, LocalRank{r, size});
        EXPECT_GE(cpus.size(), 2u * (cores / size)) << cores << " " << size << " " << r;
        seen.insert(cpus.begin(), cpus.end());
        for (int cpu : cpus)  // both hardware threads of a core go to the same rank
          EXPECT_TRUE(std::count(cpus.begin(), cpus.end(), (cpu + cores) % (2 * cores)));
      }
      EXPECT_EQ(seen.size(), static_cast<size_t>(2 * cores));
      EXPECT_EQ(std::set<int>(seen.begin(), seen.end()).size(), seen.size());
    }
  }
}

TEST(Binding, MoreRanksThanCoresWrapAround) {
  const CpuTopology t = fake(2, 1);
  EXPECT_EQ(cpus_for_local_rank(t, LocalRank{0, 5}), std::vector<int>{0});
  EXPECT_EQ(cpus_for_local_rank(t, LocalRank{3, 5}), std::vector<int>{1});
  EXPECT_EQ(cpus_for_local_rank(t, LocalRank{4, 5}), std::vector<int>{0});
  EXPECT_THROW(cpus_for_local_rank(t, LocalRank{5, 5}), Error);
}

TEST(Binding, ReadsLauncherEnvironment) {
  ::unsetenv("MPI_LOCALRANKID");
  ::unsetenv("SLURM_LOCALID");
  ::setenv("OMPI_COMM_WORLD_LOCAL_RANK", "1", 1);
  ::setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "3", 1);
  auto r = local_rank_from_env();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->rank, 1);
  EXPECT_EQ(r->size, 3);
  ::setenv("OMPI_COMM_WORLD_LOCAL_RANK", "x1", 1);
  EXPECT_THROW(local_rank_from_env(), Error);
  ::setenv("OMPI_COMM_WORLD_LOCAL_RANK", "3", 1);
  EXPECT_THROW(local_rank_from_env(), Error);  // rank must be below the size
  ::unsetenv("OMPI_COMM_WORLD_LOCAL_RANK");
  ::unsetenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  EXPECT_FALSE(local_rank_from_env().has_value());
}

TEST(Binding, LoneRankAndLauncherBindingAreLeftAlone) {
  CpuTopology t = fake(4, 1);
  EXPECT_FALSE(bind_local_rank(t, std::nullopt).bound);
  EXPECT_FALSE(bind_local_rank(t, LocalRank{0, 1}).bound);
  t.bound_cpus = {2};  // mpirun already bound this process to CPU 2
  const BindResult r = bind_local_rank(t, LocalRank{1, 2});
  EXPECT_FALSE(r.bound);
  EXPECT_EQ(r.cpus, std::vector<int>{2});
  EXPECT_NE(r.note.find("keeping"), std::string::npos) << r.note;
}

}  // namespace
}  // namespace ssd
