#include "topology/sim/chrome_trace.h"

#include <fstream>
#include <set>

#include "runtime/core/error.h"

namespace ssd::sim {

nlohmann::json chrome_trace(const std::vector<SimEvent>& events, const std::string& label) {
  nlohmann::json list = nlohmann::json::array();
  std::set<int32_t> ranks;
  for (const SimEvent& e : events) {
    ranks.insert(e.rank);
    list.push_back({{"name", e.name},
                    {"cat", label},
                    {"ph", "X"},
                    {"pid", e.rank},
                    {"tid", e.role},
                    {"ts", e.start_s * 1e6},
                    {"dur", e.dur_s * 1e6}});
  }
  for (int32_t r : ranks)
    list.push_back({{"name", "process_name"},
                    {"ph", "M"},
                    {"pid", r},
                    {"args", {{"name", fmt::format("rank {} ({})", r, label)}}}});
  return {{"traceEvents", list}, {"displayTimeUnit", "ms"}};
}

void write_chrome_trace(const std::string& path, const std::vector<SimEvent>& events,
                        const std::string& label) {
  std::ofstream out(path);
  SSD_CHECK(out.good(), "cannot write trace '{}'", path);
  out << chrome_trace(events, label).dump() << '\n';
  SSD_CHECK(out.good(), "writing trace '{}' failed", path);
}

}  // namespace ssd::sim
