// The CPU twin of the fused Domino walk (kernels/cuda/domino_walk.cu): the same kernels/common/
// domino_math.h functions in the same order, one chain and one position after another, with
// every dot product in the device's lane + butterfly order. Used by the head's CPU test (the
// twin against DominoHead::walk, tests/unit/spec) and by the CUDA op comparison (the twin
// against the device kernel, tests/unit/cuda).
//
// Weights are plain floats: the checkpoint's values decoded exactly (every F32, F16 and BF16
// value is a float). The device reads the same values from the stored bytes, so the twin
// matches it for a head of any of those types.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "runtime/drafters/domino/domino_checkpoint.h"
#include "runtime/model/model_file.h"

namespace ssd::test {

struct DominoTwinHead {
  int64_t d = 0, g = 0, r = 0, vd = 0;
  std::vector<float> embd;           // [V, d] the target's token embeddings, decoded
  std::vector<float> w_ih, w_hh;     // [3g, d], [3g, g]
  std::vector<float> b_ih, b_hh;     // [3g]
  std::vector<float> w1, w2;         // [r, d + g], [Vd, r]
  std::vector<int32_t> vocab_ids;    // [Vd] draft index -> target id; empty = identity
};

// A checkpoint's head and the target's embeddings as the device holds them (decoded exactly;
// embedding rows with the device's decoder, kernels/common/dequant.h).
DominoTwinHead domino_twin_head(const DominoCheckpoint& ck, const ModelFile& target);

// launch_domino_walk on the host: chain c owns rows first[c] .. first[c + 1] - 1 of logits
// ([rows, Vd], base in, final out) and hidden ([rows, d]); returns the tokens [rows] (target
// ids; -1 from a row that is all NaN, after which the chain stops).
std::vector<int32_t> domino_twin_walk(const DominoTwinHead& h, float* logits, const float* hidden,
                                      std::span<const int64_t> first,
                                      std::span<const int32_t> anchors, bool use_head);

}  // namespace ssd::test
