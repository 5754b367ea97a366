#include "launch/cli/topo_command.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "actors/transport/rank_layout.h"
#include "launch/cli/flags.h"
#include "topology/binding.h"
#include "topology/gpu_discovery.h"
#include "topology/topology.h"

namespace ssd {
namespace {

struct TopoArgs {
  int32_t tp = 1;
  int32_t drafters = 1;
  std::optional<std::filesystem::path> stats_json;

  template <class V>
  void visit(V&& v) {
    v(tp, "tp", "target ranks of the layout to place (--target-ranks of ssd-launch)",
      {.min = 1, .max = 256});
    v(drafters, "drafters", "drafter ranks of the layout to place (--drafter-ranks)",
      {.min = 0, .max = 256});
    v(stats_json, "stats-json", "write the node and the placement as JSON to this path");
  }
};

}  // namespace

int run_topo_command(int argc, const char* const* argv) {
  TopoArgs args;
  if (parse_or_print_help(argc, argv, args, "ssd topo",
                          "Describe this node and where each rank of a layout would sit."))
    return 0;
  const CpuTopology topo = discover_topology();
  const GpuDiscovery gpus = discover_gpus();
  fmt::print("cpu: {}\n", topo.summary());
  for (int c = 0; c < topo.n_cores(); ++c)
    fmt::print("  core {:>3}: hardware threads {}\n", c, topo.cores[static_cast<size_t>(c)]);
  if (gpus.gpus.empty()) fmt::print("gpu: {}\n", gpus.note);
  for (const GpuInfo& g : gpus.gpus)
    fmt::print("gpu {}: {} | {} | {:.1f} GiB\n", g.index, g.name, g.bus_id,
               static_cast<double>(g.memory_bytes) / (1 << 30));
  for (size_t i = 0; i < gpus.links.size(); ++i)
    for (size_t j = i + 1; j < gpus.links.size(); ++j)
      fmt::print("  gpu {} <-> gpu {}: {}\n", i, j, gpus.links[i][j]);

  const int world = args.tp + args.drafters;
  const RankLayout layout = RankLayout::make(world, 0, args.tp);
  fmt::print("layout: {}{}\n", layout.summary(),
             world > topo.n_cores() ? fmt::format(" (oversubscribed: {} ranks on {} cores)",
                                                  world, topo.n_cores())
                                    : "");
  nlohmann::json ranks = nlohmann::json::array();
  for (int r = 0; r < world; ++r) {
    const std::vector<int> cpus = cpus_for_local_rank(topo, LocalRank{r, world});
    const std::string gpu = gpus.gpus.empty()
                                ? "no GPU"
                                : fmt::format("gpu {}", r % static_cast<int>(gpus.gpus.size()));
    fmt::print("  {:<36} cpus {:<12} {}\n", layout.describe(r), fmt::format("{}", cpus), gpu);
    ranks.push_back({{"rank", r}, {"role", layout.describe(r)}, {"cpus", cpus},
                     {"device", gpus.gpus.empty() ? -1 : r % static_cast<int>(gpus.gpus.size())}});
  }
  if (args.stats_json) {
    nlohmann::json j;
    j["cpu"] = topo.summary();
    j["cores"] = topo.cores;
    j["gpus"] = nlohmann::json::array();
    for (const GpuInfo& g : gpus.gpus)
      j["gpus"].push_back({{"index", g.index}, {"name", g.name}, {"bus_id", g.bus_id},
                           {"memory_bytes", g.memory_bytes}});
    j["gpu_links"] = gpus.links;
    j["gpu_note"] = gpus.note;
    j["layout"] = layout.summary();
    j["ranks"] = ranks;
    std::ofstream(*args.stats_json) << j.dump(2) << "\n";
  }
  return 0;
}

}  // namespace ssd
