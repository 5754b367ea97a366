// The all-gather every tensor-parallel exchange of this project reduces to: a [rows, width]
// matrix whose columns are split over the ranks (rank r holds columns [off[r], off[r+1]) of every
// row, as its own [rows, off[r+1] - off[r]] block) is reassembled whole on every rank. One
// allgatherv moves the blocks (they arrive rank after rank), then each row is stitched together.
// Used for the vocab-parallel logits and for the exact TP layout's activations (decoder_layer.h).
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/parallel/collective.h"

namespace ssd {

// Collective. local: [rows, off[me+1] - off[me]]; out: [rows, off.back()] (every rank); off:
// [size + 1], identical on every rank. `scratch` holds the blocks in arrival order (reused).
void gather_columns(Collective& comm, const float* local, int64_t rows,
                    const std::vector<int64_t>& off, std::vector<float>& scratch, float* out);

}  // namespace ssd
