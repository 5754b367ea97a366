// A block-quantized weight matrix repacked once, at load time, for the integer matmul
// (packed_matmul.h). The mapped file is never modified: packing reads it and writes a new,
// 64-byte aligned buffer of about the same size, in huge pages where the system gives them
// (runtime/core/huge_page_arena.h).
//
// Why repack: the integer kernels compute 16 rows at once, one row per 32-bit lane, so that the
// 32 x 4 = 128 products of a 32-value block land in each row's own lane (no horizontal sums) and
// every activation group of 4 codes is one broadcast. That needs the 4-byte groups of 16 rows
// side by side, and the per-block scales of 16 rows side by side, which the file's
// row-after-row, block-after-block layout does not give.
//
// Layout. Rows are grouped in tiles of kTileRows (the last tile padded with zero rows). A tile
// holds, in this order (offsets in PackedMatrix):
//   quants     per 32-value chunk c: `steps` of 64 bytes; step s holds for row k (bytes 4k..4k+3)
//              the codes of the chunk's values 4s..4s+3, as unsigned bytes:
//                Q4_0/Q4_1/Q4_K  4 steps of nibble pairs: the low nibble of step j is value 4j+i,
//                                the high nibble value 16+4j+i (GGML's Q4_0 order in every type);
//                Q8_0            8 steps, q + 128 (so that all codes are unsigned);
//                Q6_K            4 nibble steps as above, then 2 steps of high bits: byte i of
//                                row k in high step g holds, at bits 2o..2o+1, the two high bits
//                                of the value of nibble step 4g+o (o < 4; nibble step 4+j is the
//                                high nibbles of step j).
//   chunk scales per chunk, 16 entries per field:
//                Q4_0, Q8_0  d (f16)       Q4_1  d (f16), m (f16)
//                Q4_K        sc (u8), m (u8)            Q6_K  scale of values 0..15 (i8), of 16..31
//   super scales per 256-value super-block, 16 entries per field (K-quants only):
//                Q4_K        d (f16), dmin (f16)        Q6_K  d (f16)
// Values: Q4_0 (q - 8) d; Q4_1 q d + m; Q8_0 (q - 128) d; Q4_K d sc q - dmin m; Q6_K
// d sc (q - 32) -- the same values as the file's, bit for bit (tested).
#pragma once

#include <cstdint>
#include <memory>

#include "kernels/cpu/matmul.h"
#include "runtime/core/dtype.h"

namespace ssd::kernels {

constexpr int kTileRows = 16;

struct PackedMatrix {
  DType type = DType::Q4_0;
  int64_t rows = 0, cols = 0;
  int64_t tiles = 0;                // ceil(rows / kTileRows)
  int64_t chunks = 0;               // cols / 32
  int steps = 0;                    // 64-byte steps of quants per chunk
  uint64_t chunk_scale_bytes = 0;   // per chunk, in the chunk scale region
  uint64_t super_scale_bytes = 0;   // per 256-value super-block (0: not a K-quant)
  uint64_t chunk_scale_offset = 0;  // from the start of a tile
  uint64_t super_scale_offset = 0;
  uint64_t tile_bytes = 0;  // stride between tiles, a multiple of 64

  // (always_inline: also used by the ISA-specific kernel files; see half.h for why.)
  [[gnu::always_inline]] const uint8_t* tile(int64_t i) const {
    return data_.get() + static_cast<uint64_t>(i) * tile_bytes;
  }

  // Allocates (64-byte aligned) storage for `tiles` tiles, from HugePageArena.
  void allocate();
  uint8_t* mutable_tile(int64_t i) { return data_.get() + static_cast<uint64_t>(i) * tile_bytes; }

 private:
  struct Free {
    void operator()(uint8_t* p) const;
  };
  std::unique_ptr<uint8_t[], Free> data_;
};

// True for the types the integer matmul implements (Q4_0, Q4_1, Q8_0, Q4_K, Q6_K).
bool has_packed_kernel(DType t);

// The packed copy of w (w.type must have a packed kernel). Matrices already packed and still
// alive are shared, not packed twice: a model whose output layer is its token embedding table
// prepares the same bytes twice and gets one copy. (So the bytes of w must not change while a
// packed copy of them is alive, which holds for weights mapped read-only from a file.)
std::shared_ptr<const PackedMatrix> pack_matrix(const WeightMatrix& w);

}  // namespace ssd::kernels
