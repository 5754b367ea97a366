// The integer matmul kernels, written once over a small instruction-set traits struct V and
// compiled once per instruction set: packed_matmul_avx512.cpp (VNNI, 16 lanes),
// packed_matmul_avx2.cpp (8 lanes) and packed_matmul_scalar.cpp (1 lane) each define their V and
// include this file. Everything here is a template on V, and every V lives in an anonymous
// namespace, so each file gets its own internal copies compiled with its own flags.
//
// What V provides (L = V::kLanes rows per vector, one 32-bit lane per row):
//   F, I, B        L floats, L int32, L x 4 bytes
//   load_b(p)      the L x 4 bytes at p          nib_lo(b), nib_hi(b)   the nibbles of each byte
//   q6_high<o>(n, h)  n | (((h >> 2o) & 3) << 4) per byte (Q6_K's two high bits)
//   dot_u(acc, w, x)  acc + sum over each lane's 4 bytes of w (unsigned, < 128) times the 4 int8
//                  activation codes at x (the same 4 for every lane)
//   Q8, prep_q8(b), dot_q8(acc, w, x)   the same for Q8_0's biased bytes: the sum of (b - 128) x
//                  when !kQ8Biased, of b x when kQ8Biased (the caller subtracts 128 * sum x)
//   zero_i, add_i, sub_i(acc, v)   integer lanes;
//   zero_f, set1, cvt, mul, fma(a, b, c) = a b + c, fnma(a, b, c) = c - a b   float lanes
//   load_h(p), load_u8(p), load_i8(p)  L f16 / u8 / i8 values to float;   store(p, f)
//
// A pass computes L rows of one 16-row tile for NT tokens over all chunks (32 values) of the
// row. Per chunk and token: an exact integer dot product I of the weight codes and the token's
// activation codes, minus the format's offset times the sum of the codes, then, into the token's
// one float32 accumulator, in this order:
//   Q4_0, Q8_0  acc = fma(I, d * dx, acc)
//   Q4_1        acc = fma(I, d * dx, acc); acc = fma(m, sx, acc)
//   Q4_K        acc = fma(I, (D sc) * dx, acc); acc = acc - (Dmin m) * sx  (one rounding)
//   Q6_K        acc = fma(I_lo, (D sc_lo) * dx, acc); acc = fma(I_hi, (D sc_hi) * dx, acc)
// (dx: the token's block scale, sx = dx * sum of its codes (act_q8.h); I_lo / I_hi: Q6_K's two
// 16-value scale groups; D sc and Dmin m are exact products). One accumulator per token keeps 8
// tokens' accumulators and a chunk's 8 code registers within the 32 zmm registers; the tokens'
// chains are independent, and a single token's chain (two FMAs per chunk) is shorter than the
// chunk's other work. The order is the same for every lane count and token count, and each lane
// sees only its own row, so results are bitwise the same on every ISA, for every n and thread
// split. packed_matmul_ref.cpp states the same sums from the file's block layout; tests hold
// every V to it bit for bit.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <utility>

#include "kernels/cpu/act_q8.h"
#include "kernels/cpu/packed_matrix.h"
#include "kernels/cpu/rowops_table.h"

namespace ssd::kernels::detail::packed {

// The 8 unsigned code steps of a nibble chunk (low nibbles: steps 0-3, high: 4-7).
template <class V>
[[gnu::always_inline]] inline void nibble_steps(const uint8_t* q, typename V::B* w) {
  for (int j = 0; j < 4; ++j) {
    const typename V::B v = V::load_b(q + 64 * j);
    w[j] = V::nib_lo(v);
    w[j + 4] = V::nib_hi(v);
  }
}

// The 8 steps of a chunk against the token's 32 activation codes at x, in two chains (shorter
// latency; the sum is exact, so how the chains are split changes nothing in the result).
template <class V>
[[gnu::always_inline]] inline typename V::I dot8(const typename V::B* w, const int8_t* x) {
  typename V::I lo = V::zero_i(), hi = V::zero_i();
  for (int j = 0; j < 4; ++j) lo = V::dot_u(lo, w[j], x + 4 * j);
  for (int j = 4; j < 8; ++j) hi = V::dot_u(hi, w[j], x + 4 * j);
  return V::add_i(lo, hi);
}

// The activations of tokens t0 .. t0 + NT - 1 for chunk c, each at a fixed offset (act_q8.h's
// block-major layout): codes x + 32 t, scale d[t], dx * code sum s[t], half code sums qs[2 t..].
// (A template on V like everything here, so that no copy compiled with one ISA's flags can be
// linked into another's code.)
template <class V>
struct Acts {
  const int8_t* x;
  const float* d;
  const float* s;
  const int32_t* qs;
  [[gnu::always_inline]] Acts(const ActQ8& a, int64_t t0, int64_t c)
      : x(a.codes(t0, c)),
        d(a.d + a.at(t0, c)),
        s(a.sum + a.at(t0, c)),
        qs(a.qsum + 2 * a.at(t0, c)) {}
};

// Software prefetch of the next tile, spread over the current tile's chunks (chunk c fetches the
// c-th share of it), so that DRAM keeps streaming while a batch of tokens is multiplied: the
// hardware prefetcher alone lets the memory idle when a tile takes long to compute. Addresses past
// the end are harmless (a prefetch never faults).
template <class V>
struct Prefetch {
  const uint8_t* next = nullptr;  // null: nothing to prefetch
  uint64_t per_chunk = 0;
  [[gnu::always_inline]] void operator()(int64_t c) const {
    if (!next) return;
    for (uint64_t o = 0; o < per_chunk; o += 64)
      __builtin_prefetch(next + static_cast<uint64_t>(c) * per_chunk + o, 0, 3);
  }
};

// Per format: pass<V, NT>(p, tile, lane0, a, t0, pf, out) fills out[t] with rows [lane0,
// lane0 + L) of the tile for tokens t0 .. t0 + NT - 1, prefetching with pf. A row's entry is 4 *
// lane0 bytes into each 64-byte quant step and lane0 entries into each 16-entry scale field.
struct FmtQ4_0 {
  template <class V, int NT>
  static void pass(const PackedMatrix& p, const uint8_t* tile, int lane0, const ActQ8& a,
                   int64_t t0, const Prefetch<V>& pf, typename V::F* out) {
    const uint8_t* q = tile + 4 * lane0;
    const uint8_t* cs = tile + p.chunk_scale_offset + 2 * lane0;  // f16 fields
    for (int t = 0; t < NT; ++t) out[t] = V::zero_f();
    for (int64_t c = 0; c < p.chunks; ++c) {
      typename V::B w[8];
      pf(c);
      nibble_steps<V>(q + c * 256, w);
      const auto d = V::load_h(cs + c * 32);
      const Acts<V> xs(a, t0, c);
      for (int t = 0; t < NT; ++t) {
        const int8_t* x = xs.x + 32 * t;
        const auto s = V::sub_i(dot8<V>(w, x), 8 * (xs.qs[2 * t] + xs.qs[2 * t + 1]));
        out[t] = V::fma(V::cvt(s), V::mul(d, V::set1(xs.d[t])), out[t]);
      }
    }
  }
};

struct FmtQ8_0 {
  template <class V, int NT>
  static void pass(const PackedMatrix& p, const uint8_t* tile, int lane0, const ActQ8& a,
                   int64_t t0, const Prefetch<V>& pf, typename V::F* out) {
    const uint8_t* q = tile + 4 * lane0;
    const uint8_t* cs = tile + p.chunk_scale_offset + 2 * lane0;  // f16 fields
    for (int t = 0; t < NT; ++t) out[t] = V::zero_f();
    for (int64_t c = 0; c < p.chunks; ++c) {
      pf(c);
      typename V::Q8 w[8];
      for (int s = 0; s < 8; ++s) w[s] = V::prep_q8(V::load_b(q + c * 512 + 64 * s));
      const auto d = V::load_h(cs + c * 32);
      const Acts<V> xs(a, t0, c);
      for (int t = 0; t < NT; ++t) {
        const int8_t* x = xs.x + 32 * t;
        auto s = V::zero_i(), s2 = V::zero_i();
        for (int j = 0; j < 4; ++j) s = V::dot_q8(s, w[j], x + 4 * j);
        for (int j = 4; j < 8; ++j) s2 = V::dot_q8(s2, w[j], x + 4 * j);
        s = V::add_i(s, s2);
        if constexpr (V::kQ8Biased) s = V::sub_i(s, 128 * (xs.qs[2 * t] + xs.qs[2 * t + 1]));
        out[t] = V::fma(V::cvt(s), V::mul(d, V::set1(xs.d[t])), out[t]);
      }
    }
  }
};

struct FmtQ4_1 {
  template <class V, int NT>
  static void pass(const PackedMatrix& p, const uint8_t* tile, int lane0, const ActQ8& a,
                   int64_t t0, const Prefetch<V>& pf, typename V::F* out) {
    const uint8_t* q = tile + 4 * lane0;
    const uint8_t* cs = tile + p.chunk_scale_offset + 2 * lane0;  // f16 fields
    for (int t = 0; t < NT; ++t) out[t] = V::zero_f();
    for (int64_t c = 0; c < p.chunks; ++c) {
      typename V::B w[8];
      pf(c);
      nibble_steps<V>(q + c * 256, w);
      const auto d = V::load_h(cs + c * 64), m = V::load_h(cs + c * 64 + 32);
      const Acts<V> xs(a, t0, c);
      for (int t = 0; t < NT; ++t) {
        const auto i = dot8<V>(w, xs.x + 32 * t);
        out[t] = V::fma(V::cvt(i), V::mul(d, V::set1(xs.d[t])), out[t]);
        out[t] = V::fma(m, V::set1(xs.s[t]), out[t]);
      }
    }
  }
};

struct FmtQ4_K {
  template <class V, int NT>
  static void pass(const PackedMatrix& p, const uint8_t* tile, int lane0, const ActQ8& a,
                   int64_t t0, const Prefetch<V>& pf, typename V::F* out) {
    const uint8_t* q = tile + 4 * lane0;
    const uint8_t* cs = tile + p.chunk_scale_offset + lane0;      // 8-bit fields
    const uint8_t* ss = tile + p.super_scale_offset + 2 * lane0;  // f16 fields
    for (int t = 0; t < NT; ++t) out[t] = V::zero_f();
    for (int64_t sb = 0; sb < p.chunks / 8; ++sb) {
      const auto d = V::load_h(ss + sb * 64), dmin = V::load_h(ss + sb * 64 + 32);
      for (int64_t c = 8 * sb; c < 8 * sb + 8; ++c) {
        typename V::B w[8];
        pf(c);
        nibble_steps<V>(q + c * 256, w);
        const auto dsc = V::mul(d, V::load_u8(cs + c * 32));         // exact: f16 x 6 bits
        const auto dm = V::mul(dmin, V::load_u8(cs + c * 32 + 16));  // exact
        const Acts<V> xs(a, t0, c);
        for (int t = 0; t < NT; ++t) {
          const auto i = dot8<V>(w, xs.x + 32 * t);
          out[t] = V::fma(V::cvt(i), V::mul(dsc, V::set1(xs.d[t])), out[t]);
          out[t] = V::fnma(dm, V::set1(xs.s[t]), out[t]);
        }
      }
    }
  }
};

struct FmtQ6_K {
  template <class V, int NT>
  static void pass(const PackedMatrix& p, const uint8_t* tile, int lane0, const ActQ8& a,
                   int64_t t0, const Prefetch<V>& pf, typename V::F* out) {
    const uint8_t* q = tile + 4 * lane0;
    const uint8_t* cs = tile + p.chunk_scale_offset + lane0;      // 8-bit fields
    const uint8_t* ss = tile + p.super_scale_offset + 2 * lane0;  // f16 fields
    for (int t = 0; t < NT; ++t) out[t] = V::zero_f();
    for (int64_t sb = 0; sb < p.chunks / 8; ++sb) {
      const auto d = V::load_h(ss + sb * 32);
      for (int64_t c = 8 * sb; c < 8 * sb + 8; ++c) {
        typename V::B w[8];
        pf(c);
        const uint8_t* qc = q + c * 384;
        nibble_steps<V>(qc, w);
        const typename V::B h0 = V::load_b(qc + 256), h1 = V::load_b(qc + 320);
        w[0] = V::template q6_high<0>(w[0], h0);
        w[1] = V::template q6_high<1>(w[1], h0);
        w[2] = V::template q6_high<2>(w[2], h0);
        w[3] = V::template q6_high<3>(w[3], h0);
        w[4] = V::template q6_high<0>(w[4], h1);
        w[5] = V::template q6_high<1>(w[5], h1);
        w[6] = V::template q6_high<2>(w[6], h1);
        w[7] = V::template q6_high<3>(w[7], h1);
        const auto dlo = V::mul(d, V::load_i8(cs + c * 32));       // exact: f16 x 8 bits
        const auto dhi = V::mul(d, V::load_i8(cs + c * 32 + 16));  // exact
        const Acts<V> xs(a, t0, c);
        for (int t = 0; t < NT; ++t) {
          const int8_t* x = xs.x + 32 * t;
          auto lo = V::zero_i(), hi = V::zero_i();
          for (int j = 0; j < 4; ++j) lo = V::dot_u(lo, w[j], x + 4 * j);
          for (int j = 4; j < 8; ++j) hi = V::dot_u(hi, w[j], x + 4 * j);
          lo = V::sub_i(lo, 32 * xs.qs[2 * t]);
          hi = V::sub_i(hi, 32 * xs.qs[2 * t + 1]);
          const auto dx = V::set1(xs.d[t]);
          out[t] = V::fma(V::cvt(lo), V::mul(dlo, dx), out[t]);
          out[t] = V::fma(V::cvt(hi), V::mul(dhi, dx), out[t]);
        }
      }
    }
  }
};

using TileNtFn = void (*)(const PackedMatrix&, int64_t, const ActQ8&, int64_t, float*, int64_t);

// One tile for NT tokens: every pass, then the valid rows stored.
template <class V, class Fmt, int NT>
void tile_nt(const PackedMatrix& p, int64_t tile, const ActQ8& a, int64_t t0, float* y,
             int64_t ldy) {
  constexpr int L = V::kLanes;
  const uint8_t* base = p.tile(tile);
  const int64_t row0 = tile * kTileRows;
  for (int h = 0; h < kTileRows / L; ++h) {
    if (row0 + L * h >= p.rows) break;  // only padding rows left
    typename V::F out[NT];
    // The first pass of the first token group prefetches the next tile; the others find it cached.
    const uint64_t share = (p.tile_bytes / static_cast<uint64_t>(p.chunks) + 63) / 64 * 64;
    const bool first = h == 0 && t0 == 0 && tile + 1 < p.tiles;
    const Prefetch<V> pf{first ? p.tile(tile + 1) : nullptr, share};
    Fmt::template pass<V, NT>(p, base, L * h, a, t0, pf, out);
    const int64_t r = row0 + L * h;
    const int64_t valid = p.rows - r < L ? p.rows - r : L;
    for (int t = 0; t < NT; ++t) {
      float* dst = y + (t0 + t) * ldy + r;
      if (valid == L) {
        V::store(dst, out[t]);
      } else {
        float tmp[L];
        V::store(tmp, out[t]);
        for (int64_t i = 0; i < valid; ++i) dst[i] = tmp[i];
      }
    }
  }
}

template <class V, class Fmt, int... N>
constexpr auto nt_table(std::integer_sequence<int, N...>) {
  return std::array<TileNtFn, sizeof...(N)>{&tile_nt<V, Fmt, N + 1>...};
}

template <class V, class Fmt>
void tile(const PackedMatrix& p, int64_t tile, const ActQ8& a, int64_t t0, int nt, float* y,
          int64_t ldy) {
  static constexpr auto kTable = nt_table<V, Fmt>(std::make_integer_sequence<int, V::kMaxTokens>{});
  kTable[nt - 1](p, tile, a, t0, y, ldy);
}

template <class V>
PackedKernel kernel_for(DType t) {
  switch (t) {
    case DType::Q4_0:
      return {&tile<V, FmtQ4_0>, V::kMaxTokens};
    case DType::Q4_1:
      return {&tile<V, FmtQ4_1>, V::kMaxTokens};
    case DType::Q8_0:
      return {&tile<V, FmtQ8_0>, V::kMaxTokens};
    case DType::Q4_K:
      return {&tile<V, FmtQ4_K>, V::kMaxTokens};
    case DType::Q6_K:
      return {&tile<V, FmtQ6_K>, V::kMaxTokens};
    default:
      return {};
  }
}

}  // namespace ssd::kernels::detail::packed
