// Saving and resuming a Domino training run.
//
// Checkpoint: ONE safetensors file that `--drafter domino:PATH` loads directly
// (domino_checkpoint.h): every tensor of the layout in F32 or BF16, the config JSON under the
// "__metadata__" key "domino_config", and provenance keys beside it ("train.command",
// "train.step", "train.seed", "train.data", "train.wall_seconds", ...).
//
// Sidecar PATH.optim: what the checkpoint cannot hold for a bit-exact resumption (its tensors
// may be BF16): the float32 master parameters and the AdamW moments. Format (little-endian):
//   bytes 0..7   "SSDOPT01"
//   u64          length of the JSON header that follows
//   JSON         {"step": S, "seed": X, "params": N, "wall_seconds": T}
//   f32 [N]      parameters (the layout's flat order, domino_params.h)
//   f32 [N]      first moments m
//   f32 [N]      second moments v
// The trainer's random draws are a function of (seed, step) (train_rng.h), so there is no
// generator state to store. Both files are written atomically (temp file, rename).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "runtime/core/dtype.h"
#include "runtime/train/domino_params.h"

namespace ssd::train {

void save_checkpoint(const std::string& path, const DominoConfig& cfg, const ParamLayout& layout,
                     const float* params, DType type,
                     const std::map<std::string, std::string>& provenance);

// The parameters of a checkpoint (F32, F16 or BF16 tensors) as float32 in `layout`'s flat order.
// Throws ssd::Error naming the file when its config differs from `cfg` (checked by the caller's
// DominoCheckpoint::open) or a tensor is missing.
std::vector<float> load_checkpoint_params(const std::string& path, const DominoConfig& cfg,
                                          const ParamLayout& layout);

struct OptimState {
  int64_t step = 0;
  uint64_t seed = 0;
  double wall_seconds = 0;
  std::vector<float> params, m, v;  // [N] each
};
void save_optim_state(const std::string& path, const OptimState& s);
// Throws ssd::Error naming the file on a bad magic, a truncated file or a size != n_params.
OptimState load_optim_state(const std::string& path, int64_t n_params);

}  // namespace ssd::train
