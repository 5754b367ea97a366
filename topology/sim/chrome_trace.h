// The simulated timeline as Chrome trace-event JSON (chrome://tracing, Perfetto): one "X"
// (complete) event per span, pid = the rank, tid = the role ("target", "drafter", "link"),
// ts / dur in microseconds, plus "M" metadata events naming the processes ("rank N"), so a
// simulated run and a recorded real run can be opened side by side.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "topology/sim/round_sim.h"

namespace ssd::sim {

nlohmann::json chrome_trace(const std::vector<SimEvent>& events, const std::string& label);
void write_chrome_trace(const std::string& path, const std::vector<SimEvent>& events,
                        const std::string& label);

}  // namespace ssd::sim
