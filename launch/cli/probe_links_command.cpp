#include "launch/cli/probe_links_command.h"

#include <fmt/format.h>

#include <fstream>

#include "actors/roles/job.h"
#include "actors/transport/link_probe.h"
#include "launch/cli/build_info.h"
#include "launch/cli/flags.h"
#include "launch/cli/job_flags.h"

namespace ssd {
namespace {

struct ProbeArgs : ClusterFlags {
  int32_t pings = 64;
  int64_t allreduce_mib = 4;
  std::optional<std::filesystem::path> stats_json;

  template <class V>
  void visit(V&& v) {
    visit_around(v, [&] {
      v(pings, "pings", "latency: Ping/Pong round trips per drafter rank (median kept)",
        {.min = 1, .max = 100000});
      v(allreduce_mib, "allreduce-mib", "TP all-reduce size in MiB", {.min = 1, .max = 4096});
      v(stats_json, "stats-json", "write the figures as JSON to this path");
    });
  }
};

int probe(const ProbeArgs& args, Cluster& cluster) {
  const RankLayout& layout = cluster.layout();
  if (!cluster.distributed()) {
    fmt::print("one rank: no link to probe (launch with mpirun -n 2 or more)\n");
    return 0;
  }
  LinkProbeOptions o;
  o.quick = false;
  o.pings = args.pings;
  o.allreduce_bytes = args.allreduce_mib << 20;
  const LinkReport full = probe_links(*cluster.world(), cluster.tp_group(), layout, o);
  if (!layout.is_target_leader()) return 0;
  fmt::print("{}\n", layout.summary());
  fmt::print("{:<12} {:>12} {:>16} {:>16}\n", "link", "latency us", "1 MiB GB/s", "64 MiB GB/s");
  for (const LinkFigures& f : full.drafters)
    fmt::print("{:<12} {:>12.1f} {:>16.3f} {:>16.3f}\n", fmt::format("0<->{}", f.peer),
               f.latency_us, f.gbps_1mib, f.gbps_64mib);
  if (full.allreduce.ranks > 1)
    fmt::print("TP all-reduce over {} ranks, {} MiB: {:.3f} ms, algbw {:.3f} GB/s, busbw {:.3f} "
               "GB/s (busbw = algbw x 2(n-1)/n)\n",
               full.allreduce.ranks, full.allreduce.bytes >> 20, full.allreduce.seconds * 1e3,
               full.allreduce.algbw_gbps, full.allreduce.busbw_gbps);
  fmt::print("start-up probe of the same job: {}\n", cluster.links().summary());
  fmt::print("transport {} | {}\n", full.transport, build_description());
  if (args.stats_json) {
    nlohmann::json j;
    j["ranks"] = layout.summary();
    j["links"] = full.to_json();
    j["startup_links"] = cluster.links().to_json();
    j["commit"] = build_commit();
    j["build"] = build_description();
    std::ofstream out(*args.stats_json);
    SSD_CHECK(out.good(), "--stats-json: cannot write '{}'", args.stats_json->string());
    out << j.dump(2) << "\n";
  }
  return 0;
}

}  // namespace

int run_probe_links_command(int argc, const char* const* argv) {
  ProbeArgs args;
  if (parse_or_print_help(argc, argv, args, "ssd probe-links",
                          "Measure the latency and bandwidth of a job's links."))
    return 0;
  args.dist.fault = fault_plan_from_env();
  return run_on_cluster(args.dist, args.backend.backend, resolved_text(args), "",
                        [&](Cluster& cluster) { return probe(args, cluster); });
}

}  // namespace ssd
