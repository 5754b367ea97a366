// The flags of a distributed run (tensor parallelism, SSD's pre-speculation, the watchdog),
// declared once and shared by `ssd generate` and `ssd bench` (each command's args struct calls
// DistributedArgs::visit inside its own visit, so one list drives parsing, --help and the
// resolved config of both). to_ssd_options() turns them into the SsdDrafterCore options once at
// start-up; nothing downstream reads a flag.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "actors/frontend/flags.h"
#include "runtime/saguaro/ssd_drafter_core.h"

namespace ssd {

struct DistributedArgs {
  int32_t tp = 1;
  std::string tp_mode = "exact";
  std::string fan_out = "geometric";
  std::optional<std::string> fan_out_after_miss;
  int32_t fan_out_budget = 8;
  float saguaro_c = 1;
  std::string miss_policy = "auto";
  std::optional<int32_t> critical_batch;
  std::string prespec_chunk = "auto";
  double watchdog_s = 120;
  std::string transport = "auto";
  std::optional<std::string> devices;
  bool share_devices = false;

  template <class V>
  void visit(V&& v) {
    v(tp, "tp", "tensor-parallel degree of the target: ranks 0..tp-1 (mpirun -n tp+drafters)",
      {.min = 1, .max = 256});
    v(tp_mode, "tp-mode",
      "exact: o_proj/down_proj split by output rows, logits bit-identical to one rank (4 "
      "all-gathers per layer); megatron: split by input columns, 2 all-reduces per layer, sums "
      "in another order (greedy output can differ from one rank)",
      {.choices = {"exact", "megatron"}});
    v(fan_out, "fan-out",
      "ssd: branches pre-speculated per outcome position: geometric, constant, or a list "
      "F0,F1,..,FK used after a cache hit",
      {});
    v(fan_out_after_miss, "fan-out-after-miss",
      "ssd: the list F0,..,FK used after a miss (with a --fan-out list; default: the same)");
    v(fan_out_budget, "fan-out-budget",
      "ssd: branches per sequence for geometric/constant fan-out", {.min = 1, .max = 1024});
    v(saguaro_c, "saguaro-c",
      "ssd: Saguaro sampling, scale of the top-F draft probabilities (1 = off)",
      {.min = 1e-6, .max = 1});
    v(miss_policy, "miss-policy",
      "ssd: on a cache miss draft with the primary drafter, the n-gram backup, or auto (by the "
      "critical batch size)",
      {.choices = {"auto", "primary", "backup"}});
    v(critical_batch, "critical-batch",
      "ssd: critical batch size b* for --miss-policy auto (default: derived from measured costs)",
      {.min = 0});
    v(prespec_chunk, "prespec-chunk",
      "ssd: draft the pre-speculated branches in chunks of this many, likeliest first, and stop "
      "at the first chunk boundary after the round's outcome arrives; 0: all in one call, never "
      "cut short; auto: 2 on a CPU drafter rank, 0 on a GPU (where a batch of branches costs "
      "about what one does)");
    v(watchdog_s, "watchdog-s",
      "deadline in seconds for any one step of a distributed run (a round, a prefill, start-up); "
      "a rank that misses it ends the job with a message",
      {.min = 0.1});
    v(transport, "transport",
      "what carries the drafter link and the TP collectives: mpi, nccl (GPU ranks), or auto "
      "(nccl when built with NCCL and the backend is CUDA)",
      {.choices = {"auto", "mpi", "nccl"}});
    v(devices, "devices",
      "GPU of each global rank, e.g. 0,1,2,3,4 (default: the launcher's local rank); ignored "
      "when no GPU is used");
    v(share_devices, "share-devices",
      "allow two ranks of one node on one GPU (refused by default)");
  }
};

// The SSD drafter options these flags describe for drafts of depth k under `sampler`. Throws
// ssd::Error naming the flag for a malformed list or one of the wrong length. --prespec-chunk
// auto comes back as kPrespecChunkAuto, for the drafter rank to resolve (resolve_prespec_chunk).
inline constexpr int32_t kPrespecChunkAuto = -1;
SsdDrafterOptions to_ssd_options(const DistributedArgs& a, int32_t k, const SamplerConfig& sampler);

// --prespec-chunk auto on a drafter rank whose backend is `backend_name`: 2 on "cpu" (measured on
// the 2-core VM with the default model's Domino drafter, perf/prespec_chunk.sh: SSD 1.3-1.5x
// faster than one call), else 0. Other values pass through.
int32_t resolve_prespec_chunk(int32_t chunk, std::string_view backend_name);

}  // namespace ssd
