// Packing: each row's blocks are decoded to integer codes and scale fields with the layouts of
// quant_blocks.h, then written into the tile layout described in packed_matrix.h. Scalar and
// run once per weight at load time (about as fast as reading the file).
#include "kernels/cpu/packed_matrix.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>

#include "kernels/cpu/quant_blocks.h"
#include "runtime/core/error.h"
#include "runtime/core/huge_page_arena.h"

namespace ssd::kernels {
namespace {

constexpr int kChunk = 32;

// One row's 32-value chunk, decoded to what the tile layout stores.
struct Chunk {
  uint8_t code[kChunk];     // unsigned codes (Q8_0: q + 128; Q6_K: 0..63)
  uint16_t h0 = 0, h1 = 0;  // Q4_0/Q8_0: d; Q4_1: d, m (f16 bits)
  uint8_t s0 = 0, s1 = 0;   // Q4_K: sc, m; Q6_K: the two i8 scales (as bytes)
  uint16_t g0 = 0, g1 = 0;  // super-block: Q4_K d, dmin; Q6_K d (f16 bits)
};

Chunk read_chunk(DType t, const uint8_t* row, int64_t c) {
  Chunk k;
  switch (t) {
    case DType::Q4_0: {
      const auto& b = reinterpret_cast<const BlockQ4_0*>(row)[c];
      for (int i = 0; i < 16; ++i) k.code[i] = b.qs[i] & 15, k.code[i + 16] = b.qs[i] >> 4;
      k.h0 = b.d;
      break;
    }
    case DType::Q4_1: {
      const auto& b = reinterpret_cast<const BlockQ4_1*>(row)[c];
      for (int i = 0; i < 16; ++i) k.code[i] = b.qs[i] & 15, k.code[i + 16] = b.qs[i] >> 4;
      k.h0 = b.d;
      k.h1 = b.m;
      break;
    }
    case DType::Q8_0: {
      const auto& b = reinterpret_cast<const BlockQ8_0*>(row)[c];
      for (int i = 0; i < kChunk; ++i) k.code[i] = static_cast<uint8_t>(b.qs[i] + 128);
      k.h0 = b.d;
      break;
    }
    case DType::Q4_K: {
      const auto& b = reinterpret_cast<const BlockQ4_K*>(row)[c / 8];
      const int s = static_cast<int>(c % 8);
      for (int i = 0; i < kChunk; ++i) k.code[i] = (b.qs[32 * (s / 2) + i] >> (4 * (s % 2))) & 15;
      int sc, m;
      q4k_scale_min(b.scales, s, &sc, &m);
      k.s0 = static_cast<uint8_t>(sc);
      k.s1 = static_cast<uint8_t>(m);
      k.g0 = b.d;
      k.g1 = b.dmin;
      break;
    }
    case DType::Q6_K: {
      const auto& b = reinterpret_cast<const BlockQ6_K*>(row)[c / 8];
      const int s = static_cast<int>(c % 8);
      for (int i = 0; i < kChunk; ++i) {
        const int e = 32 * s + i, h = e / 128, j = e % 128;
        const int lo = (b.ql[64 * h + j % 64] >> (4 * (j / 64))) & 15;
        const int hi = (b.qh[32 * h + j % 32] >> (2 * (j / 32))) & 3;
        k.code[i] = static_cast<uint8_t>(lo | (hi << 4));
      }
      k.s0 = static_cast<uint8_t>(b.scales[2 * s]);
      k.s1 = static_cast<uint8_t>(b.scales[2 * s + 1]);
      k.g0 = b.d;
      break;
    }
    default:
      SSD_ASSERT(false);
  }
  return k;
}

template <class T>
void put(uint8_t* base, int field, int row, T v) {  // field-th array of 16 T, entry `row`
  std::memcpy(base + (field * kTileRows + row) * sizeof(T), &v, sizeof(T));
}

// Writes row k's chunk c into the tile.
void write_chunk(const PackedMatrix& p, uint8_t* tile, int k, int64_t c, const Chunk& ch) {
  uint8_t* q = tile + static_cast<uint64_t>(c) * p.steps * 64 + 4 * k;
  const bool nibbles = p.type != DType::Q8_0;
  if (nibbles) {
    for (int j = 0; j < 4; ++j)
      for (int i = 0; i < 4; ++i)
        q[64 * j + i] =
            static_cast<uint8_t>((ch.code[4 * j + i] & 15) | ((ch.code[16 + 4 * j + i] & 15) << 4));
  } else {
    for (int s = 0; s < 8; ++s)
      for (int i = 0; i < 4; ++i) q[64 * s + i] = ch.code[4 * s + i];
  }
  if (p.type == DType::Q6_K) {
    for (int g = 0; g < 2; ++g)
      for (int i = 0; i < 4; ++i) {
        uint8_t bits = 0;
        for (int o = 0; o < 4; ++o) {
          const int step = 4 * g + o;  // nibble step: j = step % 4, high nibble if step >= 4
          const int e = (step < 4 ? 0 : 16) + 4 * (step % 4) + i;
          bits |= static_cast<uint8_t>(((ch.code[e] >> 4) & 3) << (2 * o));
        }
        q[64 * (4 + g) + i] = bits;
      }
  }
  uint8_t* cs = tile + p.chunk_scale_offset + static_cast<uint64_t>(c) * p.chunk_scale_bytes;
  switch (p.type) {
    case DType::Q4_0:
    case DType::Q8_0:
      put<uint16_t>(cs, 0, k, ch.h0);
      break;
    case DType::Q4_1:
      put<uint16_t>(cs, 0, k, ch.h0);
      put<uint16_t>(cs, 1, k, ch.h1);
      break;
    case DType::Q4_K:
    case DType::Q6_K:
      put<uint8_t>(cs, 0, k, ch.s0);
      put<uint8_t>(cs, 1, k, ch.s1);
      break;
    default:
      SSD_ASSERT(false);
  }
  if (p.super_scale_bytes && c % 8 == 0) {
    uint8_t* ss = tile + p.super_scale_offset + static_cast<uint64_t>(c / 8) * p.super_scale_bytes;
    put<uint16_t>(ss, 0, k, ch.g0);
    if (p.type == DType::Q4_K) put<uint16_t>(ss, 1, k, ch.g1);
  }
}

uint64_t round64(uint64_t v) { return (v + 63) / 64 * 64; }

PackedMatrix layout_for(const WeightMatrix& w) {
  PackedMatrix p;
  p.type = w.type;
  p.rows = w.rows;
  p.cols = w.cols;
  p.tiles = (w.rows + kTileRows - 1) / kTileRows;
  p.chunks = w.cols / kChunk;
  switch (w.type) {
    case DType::Q4_0:
      p.steps = 4, p.chunk_scale_bytes = 32;
      break;
    case DType::Q4_1:
      p.steps = 4, p.chunk_scale_bytes = 64;
      break;
    case DType::Q8_0:
      p.steps = 8, p.chunk_scale_bytes = 32;
      break;
    case DType::Q4_K:
      p.steps = 4, p.chunk_scale_bytes = 32, p.super_scale_bytes = 64;
      break;
    case DType::Q6_K:
      p.steps = 6, p.chunk_scale_bytes = 32, p.super_scale_bytes = 32;
      break;
    default:
      SSD_ASSERT(false);
  }
  const uint64_t chunks = static_cast<uint64_t>(p.chunks);
  p.chunk_scale_offset = chunks * p.steps * 64;
  p.super_scale_offset = p.chunk_scale_offset + chunks * p.chunk_scale_bytes;
  p.tile_bytes = round64(p.super_scale_offset + chunks / 8 * p.super_scale_bytes);
  return p;
}

std::shared_ptr<const PackedMatrix> pack_new(const WeightMatrix& w) {
  auto p = std::make_shared<PackedMatrix>(layout_for(w));
  p->allocate();
  const Chunk zero{};  // padding rows: zero codes and scales contribute exact zeros
  for (int64_t ti = 0; ti < p->tiles; ++ti) {
    uint8_t* tile = p->mutable_tile(ti);
    std::memset(tile, 0, p->tile_bytes);
    for (int k = 0; k < kTileRows; ++k) {
      const int64_t r = ti * kTileRows + k;
      const uint8_t* row = r < w.rows ? w.data + static_cast<uint64_t>(r) * w.row_bytes : nullptr;
      for (int64_t c = 0; c < p->chunks; ++c) {
        Chunk ch = row ? read_chunk(w.type, row, c) : zero;
        if (!row && w.type == DType::Q8_0) std::memset(ch.code, 128, sizeof ch.code);
        write_chunk(*p, tile, k, c, ch);
      }
    }
  }
  return p;
}

}  // namespace

void PackedMatrix::Free::operator()(uint8_t* p) const { HugePageArena::shared().release(p); }

void PackedMatrix::allocate() {
  const uint64_t bytes = std::max<uint64_t>(64, tile_bytes * static_cast<uint64_t>(tiles));
  data_.reset(HugePageArena::shared().allocate(bytes));
}

bool has_packed_kernel(DType t) {
  switch (t) {
    case DType::Q4_0:
    case DType::Q4_1:
    case DType::Q8_0:
    case DType::Q4_K:
    case DType::Q6_K:
      return true;
    default:
      return false;
  }
}

std::shared_ptr<const PackedMatrix> pack_matrix(const WeightMatrix& w) {
  SSD_CHECK(has_packed_kernel(w.type), "pack weights: no integer kernel for type {}",
            dtype_name(w.type));
  SSD_CHECK(w.cols % dtype_traits(w.type).block_elems == 0 && w.rows >= 0,
            "pack weights: {} x {} is not a whole number of {} blocks per row", w.rows, w.cols,
            dtype_name(w.type));
  SSD_CHECK(w.row_bytes >= dtype_row_bytes(w.type, static_cast<uint64_t>(w.cols)) &&
                (w.data || w.rows == 0),
            "pack weights: row stride {} bytes is less than a {}-column {} row", w.row_bytes,
            w.cols, dtype_name(w.type));
  // Shared while alive: keyed by what the bytes are, not by who asked.
  using Key = std::tuple<const uint8_t*, DType, int64_t, int64_t, uint64_t>;
  static std::mutex mu;
  static std::map<Key, std::weak_ptr<const PackedMatrix>> live;
  const Key key{w.data, w.type, w.rows, w.cols, w.row_bytes};
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = live.find(key); it != live.end())
    if (auto p = it->second.lock()) return p;
  std::erase_if(live, [](const auto& kv) { return kv.second.expired(); });
  auto p = pack_new(w);
  live[key] = p;
  return p;
}

}  // namespace ssd::kernels
