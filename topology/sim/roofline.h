// What one forward of a model costs on a device (or a tensor-parallel group of them), as a
// roofline: the forward takes as long as the slower of reading its bytes and computing its FLOPs,
// plus the device's fixed per-forward overhead, plus the TP collectives (not overlapped).
//
//   bytes  = weights / T + KV bytes per token x (cached + new tokens of every sequence) / T
//   FLOPs  = (2 x params x rows + 4 x rows x context x H hd x layers) / T
// where the LM head counts only for the rows whose logits are asked (ForwardWork::logits_rows):
// 2 x (params - head) x rows + 2 x head x logits rows, and a forward asking none does not read
// the head's bytes (runtime/model/transformer.cpp returns before it: a drafter's catch-up).
//   time   = max(bytes / (bw x eff), FLOPs / (peak x eff)) + overhead
//          + layers x (the per-layer overhead + (sequences - 1) x the per-sequence overhead)
//          + layers x 2 ring all-reduces of rows x dim activations (after attention, after MLP)
//          + one ring all-gather of the rows' logits (rows x vocab x act bytes)
//
// A decode (rows = batch, short context) of a big model is memory-bound: time ~ weights / bw; a
// prefill of many rows is compute-bound: time ~ 2 params rows / peak.
#pragma once

#include <cstdint>

#include "topology/sim/hw_profile.h"
#include "topology/sim/model_shape.h"

namespace ssd::sim {

// One forward's work: `rows` query tokens over `seqs` sequences that have `context` cached tokens
// each (mean); the LM head over `logits_rows` of them (-1: every row, as a verification, an AR
// step and the calibration's timed forwards ask).
struct ForwardWork {
  double rows = 1;
  double seqs = 1;
  double context = 0;
  double logits_rows = -1;
};

struct ForwardCost {
  double bytes = 0, flops = 0;         // per device of the TP group
  double memory_s = 0, compute_s = 0;  // bytes / bw, FLOPs / peak
  double overhead_s = 0, comm_s = 0;
  double attention_s = 0;  // the cache's attention beyond the roofline (kv_*_pos_layer_s)
  double total_s = 0;
  bool compute_bound() const { return compute_s > memory_s; }
};

// T = tp devices of `device` joined by `tp_link` (unused when tp == 1). Throws ssd::Error for a
// TP degree that does not divide the heads, or an invalid profile.
ForwardCost forward_cost(const ModelShape& model, const DeviceProfile& device, int32_t tp,
                         const LinkProfile& tp_link, const ForwardWork& work);

}  // namespace ssd::sim
