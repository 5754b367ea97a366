// The simulator tests' shared configurations: h100_config(), the SSD paper's setup (Llama-3.1-70B
// at TP 4 on H100s over NVLink 4, Llama-3.2-1B drafting on a fifth, an n-gram backup), batch 4,
// K = 4, a = 0.75; cpu_like_device(), a bare CPU-class device (15 GB/s, 200 GFLOP/s, no fixed
// costs) for the calibration tests; lookup_trace(), an outcome trace of identical rounds.
#pragma once

#include <vector>

#include "topology/sim/outcome_trace.h"
#include "topology/sim/sim_config.h"

namespace ssd::sim {

inline SimConfig h100_config() {
  SimConfig c;
  c.cluster.target_device = c.cluster.drafter_device = device_preset("h100-sxm");
  c.cluster.tp = 4;
  c.cluster.tp_link = c.cluster.drafter_link = link_preset("nvlink4");
  c.target = model_preset("llama-3.1-70b");
  c.drafter.shape = model_preset("llama-3.2-1b");
  c.backup.shape.style = DraftStyle::kLookup;
  c.work = {.batch = 4, .tokens = 64, .prompt = 100, .k = 4};
  c.primary.a = 0.75;
  c.backup_acc.a = 0.2;
  return c;
}

inline DeviceProfile cpu_like_device() {
  DeviceProfile d;
  d.name = "cpu-like";
  d.mem_bw_Bps = 15e9;
  d.peak_flops = {{"bf16", 200e9}};
  return d;
}

// `rounds` rounds of `batch` sequences, each offered k and accepting `accepted`, pre-speculation
// on, every lookup a hit or every one a miss (the last round has none); no "leader" field, so the
// simulator decides who drafts a miss.
inline std::vector<OutcomeRecord> lookup_trace(int32_t rounds, int32_t batch, int32_t k,
                                               int32_t accepted, bool hit) {
  std::vector<OutcomeRecord> t;
  for (int32_t r = 0; r < rounds; ++r)
    for (int32_t s = 0; s < batch; ++s) {
      OutcomeRecord o{.round = r, .seq = s, .k = k, .accepted = accepted, .bonus_rank = 0};
      if (r + 1 < rounds) o.hit = hit;
      o.prespec = true;
      t.push_back(o);
    }
  return t;
}

}  // namespace ssd::sim
