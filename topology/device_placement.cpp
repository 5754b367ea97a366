// Rank-to-GPU placement rules (see device_placement.h).
#include "topology/device_placement.h"

#include <fmt/format.h>

#include <charconv>
#include <cstdlib>
#include <map>
#include <utility>

#include "runtime/core/error.h"

namespace ssd {

std::vector<int> parse_device_list(std::string_view text) {
  std::vector<int> out;
  size_t at = 0;
  for (;;) {
    const size_t comma = text.find(',', at);
    const std::string_view item =
        text.substr(at, comma == std::string_view::npos ? std::string_view::npos : comma - at);
    int v = -1;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    SSD_CHECK(!item.empty() && ec == std::errc() && end == item.data() + item.size() && v >= 0,
              "--devices {}: entry {} ('{}') is not a device index (a list like 0,1,2,3,4)",
              text, out.size() + 1, item);
    out.push_back(v);
    if (comma == std::string_view::npos) break;
    at = comma + 1;
  }
  return out;
}

int launcher_local_rank() {
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID",
                           "MV2_COMM_WORLD_LOCAL_RANK"}) {
    if (const char* v = std::getenv(name)) {
      int r = -1;
      const std::string_view s(v);
      const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), r);
      if (ec == std::errc() && end == s.data() + s.size() && r >= 0) return r;
    }
  }
  return 0;
}

int choose_device(const std::optional<std::vector<int>>& list, int world_rank, int world_size,
                  int local_rank) {
  if (!list) return local_rank;
  SSD_CHECK(static_cast<int>(list->size()) == world_size,
            "--devices lists {} device(s) but the job has {} rank(s): give one device per rank, "
            "in rank order (targets first, then drafters)",
            list->size(), world_size);
  return (*list)[static_cast<size_t>(world_rank)];
}

std::string check_device_placement(const std::vector<RankDevice>& ranks, bool share_devices) {
  std::string problems;
  auto add = [&](const std::string& p) { problems += (problems.empty() ? "" : "; ") + p; };
  std::map<std::pair<std::string, int>, std::vector<const RankDevice*>> users;
  for (const RankDevice& r : ranks) {
    if (r.node_devices <= 0) {
      add(fmt::format("rank {} ({}) on {} sees no GPU", r.rank, r.role, r.host));
      continue;
    }
    if (r.device >= r.node_devices) {
      add(fmt::format("rank {} ({}) on {} is given device {}, but that node has {} GPU(s) "
                      "(0..{})",
                      r.rank, r.role, r.host, r.device, r.node_devices, r.node_devices - 1));
      continue;
    }
    users[{r.host, r.device}].push_back(&r);
  }
  if (!share_devices) {
    for (const auto& [where, rs] : users) {
      if (rs.size() < 2) continue;
      std::string who;
      for (const RankDevice* r : rs)
        who += fmt::format("{}rank {} ({})", who.empty() ? "" : ", ", r->rank, r->role);
      add(fmt::format("{} share device {} on {} (pass --share-devices to allow it, or "
                      "--devices to place them apart)",
                      who, where.second, where.first));
    }
  }
  return problems;
}

std::string describe_shared_devices(const std::vector<RankDevice>& ranks) {
  std::map<std::pair<std::string, int>, std::vector<const RankDevice*>> users;
  for (const RankDevice& r : ranks)
    if (r.node_devices > 0 && r.device >= 0 && r.device < r.node_devices)
      users[{r.host, r.device}].push_back(&r);
  std::string out;
  for (const auto& [where, rs] : users) {
    if (rs.size() < 2) continue;
    std::string who;
    for (const RankDevice* r : rs)
      who += fmt::format("{}{} ({})", who.empty() ? "" : ", ", r->rank, r->role);
    out += fmt::format("{}ranks {} share GPU {} on {}", out.empty() ? "" : "; ", who,
                       where.second, where.first);
  }
  return out;
}

}  // namespace ssd
