// The part of a model's weights one tensor-parallel rank holds (the split is the TpShard's):
//
//   wq, wk, wv, w_gate, w_up, LM head, and in TpMode::Exact also wo and w_down: ROW slices (output
//       features). Rows are contiguous in the file, so a row slice points into the mapping.
//   wo, w_down in TpMode::Megatron: COLUMN slices (input features). A row's columns [c0, c1) are
//       not contiguous across rows, and the matmul kernels take a plain strided matrix, so these
//       are copied once at start-up into buffers the caller owns (TpWeightBuffers): in the
//       weight's own type when c0 and c1 fall on the type's block boundaries (always true for
//       w_down, whose split is planned in whole blocks; true for wo when head_dim * heads is a
//       multiple of the block), otherwise decoded to F32 (exact values of the stored weights, at
//       4 bytes per weight). The copies cost about 1/T of those two matrices per rank.
//   biases: sliced like their matrix's rows; norms (attn, ffn, Q/K per-head): whole.
//
// Slicing works on TensorRefs before Backend::prepare_weight, so a device backend uploads only
// the shard.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/backend/backend.h"
#include "runtime/model/decoder_layer.h"
#include "runtime/model/model_weights.h"
#include "runtime/parallel/tp_plan.h"

namespace ssd {

// Owner of column-slice copies. Buffers never move once made (weights point into them), so keep
// it alive as long as the prepared weights; it is deliberately not copyable.
struct TpWeightBuffers {
  TpWeightBuffers() = default;
  TpWeightBuffers(const TpWeightBuffers&) = delete;
  TpWeightBuffers& operator=(const TpWeightBuffers&) = delete;
  std::vector<std::vector<uint8_t>> buffers;
  int64_t bytes() const;
};

// Rows [begin, end) of a matrix (ne = {cols, rows}): points into t's data.
TensorRef slice_rows(const TensorRef& t, int64_t begin, int64_t end);
// Columns [begin, end) of every row, copied into `store` (own type if block-aligned, else F32).
TensorRef slice_cols(const TensorRef& t, int64_t begin, int64_t end, TpWeightBuffers& store);

// Layer `t`'s shard for `shard`'s rank, prepared for `backend`.
DecoderLayerWeights prepare_decoder_layer_shard(Backend& backend, const LayerWeights& t,
                                                int64_t head_dim, const TpShard& shard,
                                                TpMode mode, TpWeightBuffers& store);

}  // namespace ssd
