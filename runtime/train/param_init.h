// Initial values of a Domino drafter's parameters, a pure function of the seed:
//   fc ~ N(0, 1/F); every norm gain 1; mask_embedding ~ N(0, 0.02^2); GRU weights and biases
//   uniform(+-1/sqrt(g)) as PyTorch's nn.GRU; W1 ~ N(0, 1/(d + g)); W2 = 0, so final = base at
//   step 0 and the head starts as a no-op; ctx_inject = 0 (when the config has it), so the rows
//   start exactly as without it; backbone layers copied from target layers
//   (init_layers) when the shapes match, else N(0, 1/in) matrices.
// With a target, two more pieces start from it:
//   - the output norm gain `norm` is the target's own output norm (the drafter scores with the
//     target's LM head rows, which were trained behind that norm);
//   - FcInit::Deepest: fc starts as the identity on the slice of the DEEPEST captured feature
//     layer f and zero elsewhere, so c_j = RMSNorm(h^f_j) and a backbone layer copied from target
//     layer f + 1 (the default when the features stop at least n_layers short of the top) sees
//     exactly that layer's context keys and values at step 0. The other slices train from zero.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/model/model_file.h"
#include "runtime/train/domino_params.h"

namespace ssd::train {

enum class FcInit { Random, Deepest };

// The backbone layers to copy by default: the n_layers target layers right after the deepest
// feature layer when they exist (the copied stack continues where the features leave off), else
// the target's last n_layers.
std::vector<int32_t> default_init_layers(const DominoConfig& cfg, int64_t target_layers);

// params: [layout.total()]. init_layers: one target layer per backbone layer (may be empty: all
// random). target: may be null (then layers are random). Returns log lines (what was copied).
std::vector<std::string> init_params(const ParamLayout& layout, const DominoConfig& cfg,
                                     uint64_t seed, const ModelFile* target,
                                     const std::vector<int32_t>& init_layers, FcInit fc_init,
                                     float* params);

}  // namespace ssd::train
