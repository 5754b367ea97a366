// The integer matmul of many tokens (a prefill) on the AMX tile unit, Intel's Advanced Matrix
// Extensions.
//
// Why only many tokens: the VNNI kernel (packed_matmul_impl.h) spends, per 32-value chunk and
// token, eight vpdpbusd and a scaling step for 16 rows. One tdpbsud multiplies a chunk's codes of
// up to 16 tokens with those of 16 rows, but every chunk has its own weight and activation scales,
// so each chunk's product must leave the tiles (tilestored) to be scaled by the vector unit, and
// that round trip costs a chunk about as much as 5-8 tokens' vpdpbusd do. Measured on the Xeon
// host (one 16-row tile of 48 chunks in cache, ns per chunk): 5 tokens 12.4 VNNI / 13.9 AMX,
// 8 tokens 18.0 / 16.1, 16 tokens 35.3 / 23.0. So a group of at least kMinTokens (10) tokens
// (a prefill, a batch's round of many rows) goes here and fewer to the VNNI kernel: one
// sequence's decode step or verification (at most K + 1 = 9 rows by default) never comes here.
//
// Same results, bit for bit: a chunk's integer dot product is exact on either unit, and the
// scaling that follows is the VNNI kernel's, operation for operation and in the same order (per
// token: chunks in order, the format's FMAs). So a token's output is the VNNI kernel's and the
// reference twin's (matmul_q8_ref) whatever its group; the tests hold it there bit for bit.
//
// Shapes, per 16-row tile and chunk c (weight row r < 16, token t < nt, 10 <= nt <= 16):
//   A  tile 0 / 3   nt x 32 bytes    the tokens' signed activation codes of chunk c (act_q8.h)
//   B  tile 1 / 4   8 x 64 bytes     the rows' unsigned weight codes in the packed step layout:
//                                    row s holds for weight row r (bytes 4r..4r+3) the codes of
//                                    values 4s..4s+3 (packed_matrix.h); nibble formats are
//                                    unpacked to it first, Q8_0's steps are it already
//   C  tile 2 / 5   nt x 16 int32    C[t][r] = sum over the chunk's 32 values of A x B
//                                    (tdpbsud: signed x unsigned bytes)
// The loop is software-pipelined over chunks: chunk c's product is taken (tile set c mod 2) while
// chunk c + kAhead is unpacked and chunk c - kAhead is scaled, each through a ring of buffers, so
// that no tile load waits for the stores that wrote its codes and no vector load for the tile
// store that wrote its product (either costs ~100 cycles a chunk when it does).
//
// Q6_K keeps the VNNI kernel (its two scales per chunk would need two half-chunk products). Only
// called after rowops.cpp found AMX-TILE and AMX-INT8 and the kernel's permission to use them.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>

#include "kernels/cpu/act_q8.h"
#include "kernels/cpu/packed_matrix.h"
#include "kernels/cpu/rowops_table.h"

namespace ssd::kernels::detail {
namespace {

constexpr int kMinTokens = 10;  // fewer go to the VNNI kernel
constexpr int kMaxTokens = 16;  // rows of an A / C tile
constexpr int kAhead = 6;       // chunks between unpack, product and scaling
constexpr int kRing = 8;        // buffers per ring (> 2 kAhead would be wasted; >= kAhead + 1)
constexpr int kStepBytes = 64, kChunkSteps = 8, kChunkBytes = kStepBytes * kChunkSteps;
static_assert(kRing > kAhead && (kRing & (kRing - 1)) == 0, "ring slots are c mod kRing");

// The tile instructions are asm statements that do not tell the compiler they read memory
// (tileloadd, ldtilecfg): plain stores they depend on are forced out before them with this.
[[gnu::always_inline]] inline void memory_barrier() { asm volatile("" ::: "memory"); }

struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// Loads the tile shapes for nt tokens, unless this thread's tiles already have them (the tile
// configuration is per thread and survives context switches; nothing else here uses AMX).
void configure(int nt) {
  thread_local int configured = 0;
  if (configured == nt) return;
  TileConfig c;
  for (int s = 0; s < 2; ++s) {
    c.rows[3 * s] = static_cast<uint8_t>(nt), c.colsb[3 * s] = 32;          // A
    c.rows[3 * s + 1] = kChunkSteps, c.colsb[3 * s + 1] = kStepBytes;       // B
    c.rows[3 * s + 2] = static_cast<uint8_t>(nt), c.colsb[3 * s + 2] = 64;  // C
  }
  memory_barrier();
  _tile_loadconfig(&c);
  configured = nt;
}

// product[t][r] = the exact integer dot product of codes x (nt tokens, 32 bytes apart) and w (B
// layout), on tile set `set` (0 or 1; alternate them between consecutive chunks).
[[gnu::always_inline]] inline void chunk_product(int set, const int8_t* x, const uint8_t* w,
                                                 int32_t* product) {
  memory_barrier();
  if (set == 0) {
    _tile_zero(2);
    _tile_loadd(0, x, 32);
    _tile_loadd(1, w, kStepBytes);
    _tile_dpbsud(2, 0, 1);
    _tile_stored(2, product, 64);
  } else {
    _tile_zero(5);
    _tile_loadd(3, x, 32);
    _tile_loadd(4, w, kStepBytes);
    _tile_dpbsud(5, 3, 4);
    _tile_stored(5, product, 64);
  }
}

// Nibble chunk (256 bytes: low nibbles of the 4 steps are values 0..15, high nibbles 16..31) to
// the B layout (512 bytes).
[[gnu::always_inline]] inline void unpack_nibbles(const uint8_t* src, uint8_t* dst) {
  const __m512i lo4 = _mm512_set1_epi8(0x0f);
  for (int s = 0; s < 4; ++s) {
    const __m512i v = _mm512_loadu_si512(src + kStepBytes * s);
    _mm512_store_si512(dst + kStepBytes * s, _mm512_and_si512(v, lo4));
    _mm512_store_si512(dst + kStepBytes * (s + 4), _mm512_and_si512(_mm512_srli_epi16(v, 4), lo4));
  }
}

[[gnu::always_inline]] inline __m512 load_h(const uint8_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
[[gnu::always_inline]] inline __m512 load_u8(const uint8_t* p) {
  return _mm512_cvtepi32_ps(
      _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
}

// The activations of tokens t0.. at chunk c: scale d, d x code sum s, half code sums qs.
struct ChunkActs {
  const float* d;
  const float* s;
  const int32_t* qs;
  [[gnu::always_inline]] ChunkActs(const ActQ8& a, int64_t t0, int64_t c)
      : d(a.d + a.at(t0, c)), s(a.sum + a.at(t0, c)), qs(a.qsum + 2 * a.at(t0, c)) {}
};

// The nibble formats' codes (Q4_0, Q4_1, Q4_K): unpacked into the slot.
struct NibbleCodes {
  static constexpr bool kUnpacks = true;
  static const uint8_t* codes(const uint8_t* tile, int64_t c, uint8_t* slot) {
    unpack_nibbles(tile + c * 256, slot);
    return slot;
  }
};

// Per format: codes(tile, c, slot) gives chunk c's B layout (unpacked into `slot` when it must
// be), and scale<NT>(...) adds chunk c's product into out[t] with the VNNI kernel's operations.
// Q4_0 and Q8_0 share the offset form: their codes are q + bias, so the product is corrected by
// bias x the token's code sum before its one FMA.
template <int kBias, bool kNibbles>
struct FmtOffset {
  static constexpr bool kUnpacks = kNibbles;
  static const uint8_t* codes(const uint8_t* tile, int64_t c, uint8_t* slot) {
    if constexpr (kNibbles) return NibbleCodes::codes(tile, c, slot);
    return tile + c * kChunkBytes;
  }
  template <int NT>
  static void scale(const PackedMatrix& p, const uint8_t* tile, const ActQ8& a, int64_t t0,
                    int64_t c, const int32_t* product, __m512* out) {
    const __m512 d = load_h(tile + p.chunk_scale_offset + c * 32);
    const ChunkActs xs(a, t0, c);
    for (int t = 0; t < NT; ++t) {
      const __m512i i = _mm512_sub_epi32(_mm512_load_si512(product + 16 * t),
                                         _mm512_set1_epi32(kBias * (xs.qs[2 * t] + xs.qs[2 * t + 1])));
      out[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(i), _mm512_mul_ps(d, _mm512_set1_ps(xs.d[t])),
                               out[t]);
    }
  }
};
using FmtQ4_0 = FmtOffset<8, true>;
using FmtQ8_0 = FmtOffset<128, false>;


struct FmtQ4_1 : NibbleCodes {
  template <int NT>
  static void scale(const PackedMatrix& p, const uint8_t* tile, const ActQ8& a, int64_t t0,
                    int64_t c, const int32_t* product, __m512* out) {
    const uint8_t* cs = tile + p.chunk_scale_offset + c * 64;  // f16 d, then f16 m, per row
    const __m512 d = load_h(cs), m = load_h(cs + 32);
    const ChunkActs xs(a, t0, c);
    for (int t = 0; t < NT; ++t) {
      out[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(product + 16 * t)),
                               _mm512_mul_ps(d, _mm512_set1_ps(xs.d[t])), out[t]);
      out[t] = _mm512_fmadd_ps(m, _mm512_set1_ps(xs.s[t]), out[t]);
    }
  }
};

struct FmtQ4_K : NibbleCodes {
  template <int NT>
  static void scale(const PackedMatrix& p, const uint8_t* tile, const ActQ8& a, int64_t t0,
                    int64_t c, const int32_t* product, __m512* out) {
    const uint8_t* cs = tile + p.chunk_scale_offset + c * 32;  // u8 sc, then u8 m, per row
    const uint8_t* ss = tile + p.super_scale_offset + (c / 8) * 64;  // f16 d, then f16 dmin
    const __m512 dsc = _mm512_mul_ps(load_h(ss), load_u8(cs));        // exact, as in VNNI
    const __m512 dm = _mm512_mul_ps(load_h(ss + 32), load_u8(cs + 16));
    const ChunkActs xs(a, t0, c);
    for (int t = 0; t < NT; ++t) {
      out[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(product + 16 * t)),
                               _mm512_mul_ps(dsc, _mm512_set1_ps(xs.d[t])), out[t]);
      out[t] = _mm512_fnmadd_ps(dm, _mm512_set1_ps(xs.s[t]), out[t]);
    }
  }
};

// One 16-row tile for tokens t0 .. t0 + NT - 1 (the pipeline of the file comment), prefetching
// the next tile during the first token group as the VNNI kernel does; the valid rows stored.
template <class Fmt, int NT>
void tile_nt(const PackedMatrix& p, int64_t tile, const ActQ8& a, int64_t t0, float* y,
             int64_t ldy) {
  static_assert(kTileRows == 16, "one zmm of 16 rows per token");
  configure(NT);
  alignas(64) uint8_t slots[Fmt::kUnpacks ? kRing : 1][kChunkBytes];
  alignas(64) int32_t products[kRing][kMaxTokens * 16];
  const uint8_t* codes[kRing];
  __m512 out[NT];
  for (int t = 0; t < NT; ++t) out[t] = _mm512_setzero_ps();
  const uint8_t* base = p.tile(tile);
  const int64_t chunks = p.chunks;
  const uint8_t* next = t0 == 0 && tile + 1 < p.tiles ? p.tile(tile + 1) : nullptr;
  const uint64_t share = (p.tile_bytes / static_cast<uint64_t>(chunks) + 63) / 64 * 64;
  auto fetch = [&](int64_t c) {  // chunk c's codes into its ring slot
    codes[c % kRing] = Fmt::codes(base, c, slots[Fmt::kUnpacks ? c % kRing : 0]);
  };
  for (int64_t c = 0; c < std::min<int64_t>(kAhead, chunks); ++c) fetch(c);
  for (int64_t c = 0; c < chunks; ++c) {
    if (next)
      for (uint64_t o = 0; o < share; o += 64)
        __builtin_prefetch(next + static_cast<uint64_t>(c) * share + o, 0, 3);
    chunk_product(static_cast<int>(c & 1), a.codes(t0, c), codes[c % kRing],
                  products[c % kRing]);
    if (c + kAhead < chunks) fetch(c + kAhead);
    memory_barrier();
    if (c >= kAhead)
      Fmt::template scale<NT>(p, base, a, t0, c - kAhead, products[(c - kAhead) % kRing], out);
  }
  memory_barrier();
  for (int64_t c = std::max<int64_t>(0, chunks - kAhead); c < chunks; ++c)
    Fmt::template scale<NT>(p, base, a, t0, c, products[c % kRing], out);
  const int64_t r = tile * kTileRows;
  const int64_t valid = std::min<int64_t>(p.rows - r, kTileRows);
  const auto mask = static_cast<__mmask16>((1u << valid) - 1);
  for (int t = 0; t < NT; ++t) _mm512_mask_storeu_ps(y + (t0 + t) * ldy + r, mask, out[t]);
}

template <class Fmt, int NT>
void tile_fixed(const PackedMatrix& p, int64_t tile, const ActQ8& a, int64_t t0, int, float* y,
                int64_t ldy) {
  tile_nt<Fmt, NT>(p, tile, a, t0, y, ldy);
}

template <class Fmt, int... N>
constexpr auto nt_table(std::integer_sequence<int, N...>) {
  return std::array<PackedTileFn, sizeof...(N)>{&tile_fixed<Fmt, N + kMinTokens>...};
}

template <class Fmt>
void tile(const PackedMatrix& p, int64_t tile, const ActQ8& a, int64_t t0, int nt, float* y,
          int64_t ldy) {
  if (nt < kMinTokens) {  // the VNNI kernel, in the groups it takes
    const PackedKernel v = avx512_packed_kernel(p.type);
    for (int i = 0; i < nt; i += v.max_tokens)
      v.tile(p, tile, a, t0 + i, std::min(v.max_tokens, nt - i), y, ldy);
    return;
  }
  static constexpr auto kTable =
      nt_table<Fmt>(std::make_integer_sequence<int, kMaxTokens - kMinTokens + 1>{});
  kTable[nt - kMinTokens](p, tile, a, t0, nt, y, ldy);
}

}  // namespace

PackedKernel amx_packed_kernel(DType t) {
  switch (t) {
    case DType::Q4_0:
      return {&tile<FmtQ4_0>, kMaxTokens};
    case DType::Q4_1:
      return {&tile<FmtQ4_1>, kMaxTokens};
    case DType::Q8_0:
      return {&tile<FmtQ8_0>, kMaxTokens};
    case DType::Q4_K:
      return {&tile<FmtQ4_K>, kMaxTokens};
    default:
      return avx512_packed_kernel(t);
  }
}

}  // namespace ssd::kernels::detail
