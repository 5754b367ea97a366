// The configuration of a distributed run (tensor parallelism, SSD's pre-speculation, the
// watchdog, the transport and devices): a plain struct the command line fills in once
// (launch/cli/distributed_flags.h declares its flags) and the roles read. to_ssd_options() turns
// it into the SsdDrafterCore options once at start-up; nothing downstream reads a flag.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "actors/roles/fault_injection.h"
#include "runtime/saguaro/ssd_drafter_core.h"

namespace ssd {

struct DistributedConfig {
  int32_t tp = 1;
  std::string tp_mode = "exact";
  std::string fan_out = "geometric";
  std::optional<std::string> fan_out_after_miss;
  int32_t fan_out_budget = 8;
  float saguaro_c = 1;
  std::string miss_policy = "auto";
  std::string backup = "ngram";  // the backup speculator: ngram | suffix
  std::string miss_at = "leader";  // leader | drafter: who drafts a miss answered by a lookup
  std::optional<int32_t> critical_batch;
  std::string prespec_chunk = "auto";
  std::string prespec_switch = "auto";  // auto: PrespecSwitch decides by measurement; on: always
  std::string prespec_fit = "window";   // window: draft what fits (prespec_budget.h); all
  double watchdog_s = 120;
  std::string on_drafter_loss = "auto";  // auto | abort | continue (drafter_loss.h)
  std::string transport = "auto";
  std::optional<std::string> devices;
  bool share_devices = false;
  std::optional<std::string> trace_json;
  std::optional<std::string> link_emulate;  // LATENCY_US[,GBPS] (emulated_link.h)  // the job's timeline, every rank (trace_capture.h)
  FaultPlan fault;  // SSD_FAULT, read once by the command line (fault_injection.h); not a flag
};

// The SSD drafter options these flags describe for drafts of depth k under `sampler`. Throws
// ssd::Error naming the flag for a malformed list or one of the wrong length. --prespec-chunk
// auto comes back as kPrespecChunkAuto, for the drafter rank to resolve (resolve_prespec_chunk).
inline constexpr int32_t kPrespecChunkAuto = -1;
SsdDrafterOptions to_ssd_options(const DistributedConfig& a, int32_t k, const SamplerConfig& sampler);

// --prespec-chunk auto on a drafter rank whose backend is `backend_name`: 2 on "cpu" (measured on
// the 2-core VM with the default model's Domino drafter, perf/prespec_chunk.sh: SSD 1.3-1.5x
// faster than one call), else 0. Other values pass through.
int32_t resolve_prespec_chunk(int32_t chunk, std::string_view backend_name);

}  // namespace ssd
