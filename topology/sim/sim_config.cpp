// SimConfig's names and its one check at start-up (sim_config.h): what `ssd simulate` and the
// tests build is validated here once, before any round is simulated.
#include "topology/sim/sim_config.h"

#include <fmt/format.h>

#include "runtime/core/error.h"

namespace ssd::sim {

const char* mode_name(SimMode m) {
  switch (m) {
    case SimMode::kAr: return "ar";
    case SimMode::kSd: return "sd";
    case SimMode::kSsd: return "ssd";
  }
  return "?";
}

SimMode parse_mode(const std::string& s) {
  if (s == "ar") return SimMode::kAr;
  if (s == "sd") return SimMode::kSd;
  if (s == "ssd") return SimMode::kSsd;
  fail(fmt::format("unknown mode '{}' (ar, sd or ssd)", s));
}

void SimConfig::validate() const {
  const SimCluster& c = cluster;
  c.target_device.validate();
  c.drafter_device.validate();
  if (c.tp > 1) c.tp_link.validate();
  if (!c.colocated) c.drafter_link.validate();
  SSD_CHECK(c.drafters >= 1, "at least one drafter rank is needed (got {})", c.drafters);
  target.validate();
  target.check_tp(c.tp);
  if (target.total_weight_bytes() > 0 && c.target_device.mem_bytes > 0)
    SSD_CHECK(target.total_weight_bytes() / c.tp < c.target_device.mem_bytes,
              "{}'s weights ({:.1f} GB, {:.1f} GB per rank at TP {}) do not fit in {}'s {:.0f} GB",
              target.name, target.total_weight_bytes() / 1e9,
              target.total_weight_bytes() / 1e9 / c.tp, c.tp, c.target_device.name,
              c.target_device.mem_bytes / 1e9);
  if (drafter.shape.style != DraftStyle::kLookup) drafter.shape.validate();
  SSD_CHECK(work.batch >= 1 && work.tokens >= 1 && work.prompt >= 0 && work.k >= 1 &&
                work.k <= 32,
            "workload: batch >= 1, tokens >= 1, prompt >= 0 and 1 <= k <= 32 (got {}, {}, {}, {})",
            work.batch, work.tokens, work.prompt, work.k);
  primary.validate();
  backup_acc.validate();
  SSD_CHECK(ssd.budget >= 1, "fan-out budget must be >= 1 (got {})", ssd.budget);
  SSD_CHECK(ssd.chunk >= 0, "pre-speculation chunk must be >= 0 (got {})", ssd.chunk);
}

}  // namespace ssd::sim
