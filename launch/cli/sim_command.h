// `ssd simulate`: predict AR, SD and SSD decoding speed on a described cluster with the round
// simulator (topology/sim/round_sim.h), before anyone books it: a target TP group of GPU presets
// (or a calibrated CPU profile), drafter ranks, links, model shapes from presets or files, and
// acceptance from parameters or a recorded outcome trace. Prints tok/s per mode and batch with
// the time breakdown (target busy, target waiting, drafter busy, communication); optionally
// writes JSON, the outcome trace it simulated and a Chrome trace of the timeline.
//
// `ssd simulate --calibrate`: measure this machine (read bandwidth, the default model's forward
// times at 1..n rows) and write the fitted CPU device profile as JSON for --device-profile.
#pragma once

namespace ssd {

int run_sim_command(int argc, const char* const* argv);

}  // namespace ssd
