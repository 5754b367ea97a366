// Start-up warm-up of the forwards a run repeats, so that a backend that records replayable
// forwards (the CUDA backend's graphs, Backend::begin_replayable) has them captured before the
// first request instead of at their second use. Which sizes: the decode step at every batch
// size, the verification forward at the run's K for every batch size, and a drafter model's
// tree decode (one row per branch of every request) at every batch size; every one of these
// forwards computes logits for all its rows, so a size (batch rows) and the hidden layers it
// keeps identify its ReplayKey. Verification for a drafter fed target features keeps those
// layers, so it is warmed up with them.
//
// How: every site (a model and the KV cache it runs on) first runs one forward of its largest
// size (grow_rows: the prefill chunk), so its buffers reach their final size, because an
// allocation after a capture makes every graph on the backend stale. Only then, site after site and
// largest size first (so no later forward grows a buffer), each size runs twice on a scratch
// sequence (tokens 0 at positions 0..n-1, causal): the backend measures the first run and
// captures the second. The scratch sequence is truncated between runs and released at the end,
// so the caches are as before. Replays of other shapes (a partly accepted batch, SSD's fan-out,
// the draft's catch-up step) are still captured at their second use.
//
// Under tensor parallelism the target's site goes through the TP leader (WarmupSite::via), which
// runs every call on every rank of the group: NCCL needs each rank to capture the same forwards.
// The CPU backend replays nothing; the caller warms up only on a backend that does (on the CPU
// it would only waste forwards). Sizes above the backend's replay limit are left out by the plan.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "runtime/kv/kv_cache.h"

namespace ssd {

class TargetModel;
class Transformer;

// What a run will do, as far as forward shapes go.
struct WarmupPlan {
  int64_t max_batch = 1;       // requests decoded together (>= 1)
  std::vector<int32_t> ks;     // draft depths verified per round (empty: AR only)
  int32_t width = 1;           // first-level branches per draft (a tree of width x k nodes)
  bool plain_verify = true;    // some verification forwards keep no hidden layers
  std::vector<int32_t> feature_layers;  // the hidden layers the others keep (empty: none do)
  int64_t max_rows = 256;      // the largest forward the backend replays
};

// The target's sizes without hidden layers: decode steps of 1..max_batch rows and, with
// plain_verify, for each k the verification forwards of b full drafts, b x (1 + width x k) rows,
// b = 1..max_batch. Sorted, unique, at most max_rows.
std::vector<int64_t> target_warmup_sizes(const WarmupPlan& plan);
// The verification sizes again when feature_layers is not empty (they keep those layers), else
// none.
std::vector<int64_t> target_feature_sizes(const WarmupPlan& plan);
// A drafter model's tree decode: its depth steps 2..k forward one row per branch of every
// request, b x width rows for b = 1..max_batch (nothing unless some k >= 2). Sorted, unique,
// at most max_rows.
std::vector<int64_t> drafter_warmup_sizes(const WarmupPlan& plan);

// One model and the cache its repeated forwards run on.
struct WarmupSite {
  std::string what;              // "target", "drafter model:<path>" (for the report)
  Transformer* model = nullptr;
  KvCache* kv = nullptr;
  int64_t grow_rows = 0;         // its largest forward (e.g. the prefill chunk); 0: none
  std::vector<int64_t> sizes;    // forward sizes to run twice
  std::vector<int64_t> hidden_sizes;   // forward sizes to run twice keeping hidden_layers
  std::vector<int32_t> hidden_layers;  // (the grow forward keeps them too, to size their buffer)
  // When set, the site's sequences and forwards go through it instead of straight to model and
  // kv (which still size the forwards): a tensor-parallel leader (actors/roles/tp_target.h),
  // which runs each call on every rank of its group, so the whole group captures its graphs.
  TargetModel* via = nullptr;
};

struct WarmupResult {
  int64_t forwards = 0;   // forwards run
  double seconds = 0;
  std::string summary;    // "target 1-4,20,40 + drafter model:d.gguf 1-4"; sizes kept with
                          // hidden layers as "8,16 (hidden 3,15,27)"
};

// Runs the sites as described above. Sizes that do not fit the site's cache or its model's
// context are skipped (and left out of the summary). Throws what a forward throws, with the
// scratch sequences released.
WarmupResult warm_up_forwards(std::span<const WarmupSite> sites);

// "1-4,20,40": runs of consecutive sizes collapsed.
std::string describe_sizes(const std::vector<int64_t>& sizes);

}  // namespace ssd
