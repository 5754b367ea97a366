// Initial values of a Domino drafter's parameters (brief issue 7), a pure function of the seed:
//   fc ~ N(0, 1/F); every norm gain 1; mask_embedding ~ N(0, 0.02^2); GRU weights and biases
//   uniform(+-1/sqrt(g)) as PyTorch's nn.GRU; W1 ~ N(0, 1/(d + g)); W2 = 0, so final = base at
//   step 0 and the head starts as a no-op; backbone layers copied from target layers
//   (init_layers) when the shapes match, else N(0, 1/in) matrices.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/model/model_file.h"
#include "runtime/train/domino_params.h"

namespace ssd::train {

// params: [layout.total()]. init_layers: one target layer per backbone layer (may be empty: all
// random). target: may be null (then layers are random). Returns log lines (what was copied).
std::vector<std::string> init_params(const ParamLayout& layout, const DominoConfig& cfg,
                                     uint64_t seed, const ModelFile* target,
                                     const std::vector<int32_t>& init_layers, float* params);

}  // namespace ssd::train
