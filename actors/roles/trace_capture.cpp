#include "actors/roles/trace_capture.h"

#include <fmt/format.h>

#include <fstream>

#include "runtime/core/error.h"
#include "runtime/core/trace.h"

namespace ssd {

TraceCapture::TraceCapture(Cluster& cluster, std::string path)
    : cluster_(cluster), path_(std::move(path)) {
  offsets_ = cluster_.clock_offsets();
  trace::start(cluster_.layout().rank);
}

void TraceCapture::finish() {
  if (finished_) return;
  finished_ = true;
  const std::vector<trace::Event> mine = trace::stop();
  const RankLayout& layout = cluster_.layout();
  // Past a lost drafter rank the gather would wait for it forever: rank 0 writes its own events.
  const int lost = cluster_.lost_rank();
  const std::vector<std::string> all =
      lost >= 0 ? std::vector<std::string>{trace::encode(mine)}
                : cluster_.gather_text(trace::encode(mine));
  if (layout.rank != 0) return;
  std::vector<trace::Event> events;
  std::map<int32_t, double> offsets;
  std::map<int32_t, std::string> names;
  nlohmann::json clocks = nlohmann::json::array();
  for (size_t r = 0; r < all.size(); ++r) {
    for (trace::Event& e : trace::decode(all[r])) events.push_back(std::move(e));
    const ClockOffset o = r < offsets_.size() ? offsets_[r] : ClockOffset{};
    offsets[static_cast<int32_t>(r)] = o.offset_us;
    names[static_cast<int32_t>(r)] = layout.describe(static_cast<int>(r));
    clocks.push_back({{"rank", r},
                      {"offset_us", o.offset_us},
                      {"uncertainty_us", o.uncertainty_us},
                      {"rtt_us", o.rtt_us}});
  }
  nlohmann::json meta;
  meta["ranks"] = layout.summary();
  meta["clock"] = "steady_clock of each rank, moved onto rank 0's by the offsets below";
  meta["clock_sync"] =
      "ping-pong at start-up, 16 exchanges per rank, the smallest round trip kept: offset = "
      "t_peer - (t_send + t_recv) / 2, exact within +-uncertainty_us (half that round trip)";
  meta["clock_offsets"] = clocks;
  if (lost >= 0) {
    meta["lost_rank"] = lost;
    meta["gathered_ranks"] = "rank 0 only: a drafter rank was lost, and gathering the others' "
                             "events would wait for it (the loss is the 'drafter rank N lost' "
                             "instant on rank 0's timeline)";
  }
  std::ofstream out(path_);
  SSD_CHECK(out.good(), "--trace-json: cannot write '{}'", path_);
  out << trace::chrome_trace(std::move(events), offsets, names, meta).dump() << "\n";
  SSD_CHECK(out.good(), "--trace-json: writing '{}' failed", path_);
  fmt::print(stderr, "trace: {} ({} ranks; open in Perfetto or chrome://tracing)\n", path_,
             all.size());
}

}  // namespace ssd
