// Self-distillation: the target answers each prompt itself (greedy, batched AR decoding, stopping
// at an end-of-generation token or the budget), then one causal prefill-style forward over prompt
// + response captures the target's hidden states at the drafter's layers for every position.
// Each finished sequence goes straight to a DistillWriter, so memory holds one batch at a time.
//
// Why a second forward rather than collecting features while decoding: the forward is the same
// one a drafter's features come from at prefill (runtime/generate prefill(), hidden_layers), its
// cost is a prefill's (a fraction of decoding's), and the decoding loop stays the AR baseline's
// own code. The features a drafter receives while decoding (set_features, after verification
// forwards) equal these up to float rounding of differently grouped sums (tested).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "runtime/model/target_model.h"
#include "runtime/train/distill_dataset.h"

namespace ssd {

struct DistillOptions {
  std::vector<int32_t> layers;     // target layers to capture, in feature order
  int64_t max_new_tokens = 192;    // response budget per prompt
  int32_t batch = 8;               // prompts decoded together
  std::vector<int32_t> stop_ids;   // end-of-generation tokens (kept in the stored response)
  int64_t prefill_chunk = 512;     // chunk of the prompt prefill and of the capture forward
};

struct DistillProgress {
  size_t done = 0, total = 0;      // sequences
  int64_t prompt_tokens = 0, response_tokens = 0;
  double seconds = 0;              // since the start
  double generate_s = 0, capture_s = 0;  // of which decoding, and the feature forwards
};

using DistillProgressFn = std::function<void(const DistillProgress&)>;

// The default layers for a target of `n_layers`: 1, n_layers / 2, n_layers - 3 (deduplicated and
// clamped for tiny models). The deepest is the input of the target's last two layers, which the
// default 2-layer Domino backbone starts as copies of (param_init.h), so its first layer's
// context keys and values start exact.
std::vector<int32_t> default_distill_layers(int64_t n_layers);

// The hidden states of `tokens` (one fresh target sequence, released afterwards) at `layers`:
// [tokens.size(), layers x dim], layer blocks side by side in `layers` order.
std::vector<float> capture_features(TargetModel& target, const std::vector<int32_t>& tokens,
                                    const std::vector<int32_t>& layers, int64_t chunk = 512);

// Runs every prompt (token ids, non-empty) and adds prompt + response + features to `out`, in
// prompt order. Checks the layers and every batch's context before decoding it; throws ssd::Error.
// `progress` is called after each batch.
DistillProgress distill_prompts(TargetModel& target,
                                std::span<const std::vector<int32_t>> prompts,
                                const DistillOptions& opts, DistillWriter& out,
                                const DistillProgressFn& progress = {});

}  // namespace ssd
