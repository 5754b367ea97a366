// The float-path row kernels (dequantize a row, dot a row with up to kMaxDotTokens float
// activation rows), written once over an instruction-set traits struct V and compiled per ISA:
// rowops_avx2.cpp (8 floats per register) and rowops_avx512.cpp (16) define their V and include
// this file. Same linkage rules as packed_matmul_impl.h: everything is a template on V, every V
// lives in an anonymous namespace, and from shared headers only always_inline functions are used
// (an out-of-line copy compiled with AVX flags could win at link time and reach baseline code).
//
// Decoders turn a block into chunks of 32 floats (W: V::kRegs registers) and hand each to a
// consumer: the dot consumer multiplies it with the activation rows, the dequantize consumer
// stores it. Codes are gathered into one 256-bit register of 32 bytes (AVX2 integer ops, which
// both ISAs have) and widened by V. Decoded values use the same exact products and single
// rounding as ref::dequantize_row, so they are bit-identical to it.
//
// What V provides: F (a float register), kLanes, kRegs = 32 / kLanes, kMaxTokens (tokens whose
// accumulators fit in registers), set1, add, mul, sub, fmadd(a, b, c) = a b + c, fmsub = a b - c,
// loadu, storeu, hsum; u8x32 / i8x32 (32 bytes of a __m256i to floats, in order), f16x32 /
// bf16x32 (64 bytes at p to floats).
//
// Determinism: a token's dot product uses the same accumulators, in the same order, whatever
// n_tok is (tokens are independent lanes of work), so matmul's output for a token does not depend
// on the batch.
#pragma once

#include <immintrin.h>

#include <array>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "kernels/cpu/half.h"
#include "kernels/cpu/quant_blocks.h"
#include "kernels/cpu/rowops_table.h"

namespace ssd::kernels::detail::simd {

template <class V>
struct W {
  typename V::F r[V::kRegs];  // values [kLanes k, kLanes (k + 1)) in r[k]
};

// w * d, register by register.
template <class V>
[[gnu::always_inline]] inline void scale(W<V>& w, float d) {
  for (auto& r : w.r) r = V::mul(r, V::set1(d));
}

// 16 bytes of nibble pairs -> 32 codes: [0, 16) the low nibbles, [16, 32) the high nibbles.
template <class V>
[[gnu::always_inline]] inline __m256i nibble_codes(const uint8_t* p) {
  const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  const __m128i mask = _mm_set1_epi8(0x0f);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), mask), _mm_and_si128(q, mask));
}

// Decoders: decode(block, base, even, odd) calls even/odd(base + offset, w) for the chunks of
// one block, alternating so that consumers can keep two independent accumulator sets.
template <class V>
struct DecF32 {
  static constexpr int kElems = 32, kBytes = 128;
  template <class P, class E0, class E1>
  static void decode(const uint8_t* blk, P base, E0&& e0, E1&&) {
    W<V> w;
    for (int k = 0; k < V::kRegs; ++k)
      w.r[k] = V::loadu(reinterpret_cast<const float*>(blk) + V::kLanes * k);
    e0(base, w);
  }
  static float scalar(const uint8_t* row, int64_t i) {
    return reinterpret_cast<const float*>(row)[i];
  }
};

template <class V>
struct DecF16 {
  static constexpr int kElems = 32, kBytes = 64;
  template <class P, class E0, class E1>
  static void decode(const uint8_t* blk, P base, E0&& e0, E1&&) {
    W<V> w;
    V::f16x32(blk, w.r);
    e0(base, w);
  }
  static float scalar(const uint8_t* row, int64_t i) {
    return fp16_to_fp32(reinterpret_cast<const uint16_t*>(row)[i]);
  }
};

template <class V>
struct DecBF16 {
  static constexpr int kElems = 32, kBytes = 64;
  template <class P, class E0, class E1>
  static void decode(const uint8_t* blk, P base, E0&& e0, E1&&) {
    W<V> w;
    V::bf16x32(blk, w.r);
    e0(base, w);
  }
  static float scalar(const uint8_t* row, int64_t i) {
    return bf16_to_fp32(reinterpret_cast<const uint16_t*>(row)[i]);
  }
};

template <class V>
struct DecQ8_0 {
  static constexpr int kElems = 32, kBytes = sizeof(BlockQ8_0);
  template <class P, class E0, class E1>
  static void decode(const uint8_t* blk, P base, E0&& e0, E1&&) {
    const auto* b = reinterpret_cast<const BlockQ8_0*>(blk);
    W<V> w;
    V::i8x32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b->qs)), w.r);
    scale(w, _cvtsh_ss(b->d));
    e0(base, w);
  }
};

template <class V>
struct DecQ4_0 {
  static constexpr int kElems = 32, kBytes = sizeof(BlockQ4_0);
  template <class P, class E0, class E1>
  static void decode(const uint8_t* blk, P base, E0&& e0, E1&&) {
    const auto* b = reinterpret_cast<const BlockQ4_0*>(blk);
    const auto d = V::set1(_cvtsh_ss(b->d)), k8 = V::set1(8.0f);
    W<V> w;
    V::u8x32(nibble_codes<V>(b->qs), w.r);
    // (q - 8) * d in this order (both exact) so that q = 8 with d < 0 gives -0 like the reference
    for (auto& r : w.r) r = V::mul(V::sub(r, k8), d);
    e0(base, w);
  }
};

template <class V>
struct DecQ4_1 {
  static constexpr int kElems = 32, kBytes = sizeof(BlockQ4_1);
  template <class P, class E0, class E1>
  static void decode(const uint8_t* blk, P base, E0&& e0, E1&&) {
    const auto* b = reinterpret_cast<const BlockQ4_1*>(blk);
    const auto d = V::set1(_cvtsh_ss(b->d)), m = V::set1(_cvtsh_ss(b->m));
    W<V> w;
    V::u8x32(nibble_codes<V>(b->qs), w.r);
    for (auto& r : w.r) r = V::fmadd(r, d, m);  // q*d exact, one rounding
    e0(base, w);
  }
};

template <class V>
struct DecQ4_K {
  static constexpr int kElems = kQK_K, kBytes = sizeof(BlockQ4_K);
  template <class P, class E0, class E1>
  static void decode(const uint8_t* blk, P base, E0&& e0, E1&& e1) {
    const auto* b = reinterpret_cast<const BlockQ4_K*>(blk);
    const float d = _cvtsh_ss(b->d), dmin = _cvtsh_ss(b->dmin);
    const __m256i mask = _mm256_set1_epi8(0x0f);
    for (int p = 0; p < 4; ++p) {  // sub-blocks 2p (low nibbles) and 2p+1 (high nibbles)
      const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b->qs + 32 * p));
      for (int h = 0; h < 2; ++h) {
        int sc, mn;
        q4k_scale_min(b->scales, 2 * p + h, &sc, &mn);
        const auto ds = V::set1(d * static_cast<float>(sc));     // exact
        const auto dm = V::set1(dmin * static_cast<float>(mn));  // exact
        W<V> w;
        V::u8x32(_mm256_and_si256(h ? _mm256_srli_epi16(raw, 4) : raw, mask), w.r);
        for (auto& r : w.r) r = V::fmsub(r, ds, dm);
        if (h == 0)
          e0(base + 64 * p, w);
        else
          e1(base + 64 * p + 32, w);
      }
    }
  }
};

template <class V>
struct DecQ6_K {
  static constexpr int kElems = kQK_K, kBytes = sizeof(BlockQ6_K);
  template <class P, class E0, class E1>
  static void decode(const uint8_t* blk, P base, E0&& e0, E1&& e1) {
    const auto* b = reinterpret_cast<const BlockQ6_K*>(blk);
    const float d = _cvtsh_ss(b->d);
    const __m256i m4 = _mm256_set1_epi8(0x0f), m2 = _mm256_set1_epi8(0x03);
    const auto k32 = V::set1(32.0f);
    for (int h = 0; h < 2; ++h) {
      const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b->qh + 32 * h));
      for (int s = 0; s < 4; ++s) {  // 32 values at 128h + 32s, 16 per int8 scale
        const __m256i ql =
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b->ql + 64 * h + 32 * (s & 1)));
        const __m256i lo = _mm256_and_si256(_mm256_srli_epi16(ql, 4 * (s >> 1)), m4);
        const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * s), m2);
        const __m256i q = _mm256_or_si256(lo, _mm256_slli_epi16(hi, 4));  // 0..63 per byte
        const int si = 8 * h + 2 * s;
        const auto da = V::set1(d * static_cast<float>(b->scales[si]));      // exact
        const auto db = V::set1(d * static_cast<float>(b->scales[si + 1]));  // exact
        W<V> w;
        V::u8x32(q, w.r);
        for (int k = 0; k < V::kRegs; ++k)
          w.r[k] = V::mul(V::sub(w.r[k], k32), k < V::kRegs / 2 ? da : db);
        if ((s & 1) == 0)
          e0(base + 128 * h + 32 * s, w);
        else
          e1(base + 128 * h + 32 * s, w);
      }
    }
  }
};

template <class D>
constexpr bool kIsFloat = requires(const uint8_t* r) {
  D::scalar(r, 0);
};

template <class V, class D>
void dequantize(const uint8_t* row, float* dst, int64_t n) {
  auto store = [](float* p, const W<V>& w) {
    for (int k = 0; k < V::kRegs; ++k) V::storeu(p + V::kLanes * k, w.r[k]);
  };
  const int64_t nb = n / D::kElems;
  for (int64_t b = 0; b < nb; ++b)
    D::decode(row + b * D::kBytes, dst + b * D::kElems, store, store);
  if constexpr (kIsFloat<D>)
    for (int64_t i = nb * D::kElems; i < n; ++i) dst[i] = D::scalar(row, i);
}

// Four accumulator registers per token: two sets (even and odd chunks) of two on AVX-512, one
// set of four on AVX2; either way four independent FMA chains per token, for every NT.
template <class V, class D, int NT>
void dot_nt(const uint8_t* row, const float* x, int64_t xs, int64_t n, float* out) {
  constexpr int kSets = 4 / V::kRegs;
  typename V::F acc[kSets][NT][V::kRegs];
  for (auto& s : acc)
    for (auto& t : s)
      for (auto& r : t) r = V::set1(0.0f);
  auto consume = [&](auto set) {
    return [&, set](const float* xp, const W<V>& w) {
      for (int t = 0; t < NT; ++t) {
        auto& a = acc[decltype(set)::value][t];
        for (int k = 0; k < V::kRegs; ++k)
          a[k] = V::fmadd(w.r[k], V::loadu(xp + t * xs + V::kLanes * k), a[k]);
      }
    };
  };
  auto even = consume(std::integral_constant<int, 0>{});
  auto odd = consume(std::integral_constant<int, kSets - 1>{});
  const int64_t nb = n / D::kElems;
  int64_t b = 0;
  if constexpr (D::kElems == 32) {  // one chunk per block: alternate the sets across blocks
    for (; b + 2 <= nb; b += 2) {
      D::decode(row + b * D::kBytes, x + b * 32, even, even);
      D::decode(row + (b + 1) * D::kBytes, x + (b + 1) * 32, odd, odd);
    }
  }
  for (; b < nb; ++b) D::decode(row + b * D::kBytes, x + b * D::kElems, even, odd);
  for (int t = 0; t < NT; ++t) {
    const auto* f = &acc[0][t][0];  // the four accumulators, in a fixed order
    const auto* g = &acc[kSets - 1][t][0];
    const auto s = kSets == 2 ? V::add(V::add(f[0], f[1]), V::add(g[0], g[1]))
                              : V::add(V::add(f[0], f[1]), V::add(f[2], f[3]));
    float r = V::hsum(s);
    if constexpr (kIsFloat<D>)
      for (int64_t i = nb * D::kElems; i < n; ++i) r += D::scalar(row, i) * x[t * xs + i];
    out[t] = r;
  }
}

using DotNtFn = void (*)(const uint8_t*, const float*, int64_t, int64_t, float*);

template <class V, class D, int... N>
constexpr auto dot_table(std::integer_sequence<int, N...>) {
  return std::array<DotNtFn, sizeof...(N)>{&dot_nt<V, D, N + 1>...};
}

// Groups of up to V::kMaxTokens tokens (which group a token is in changes nothing in its result).
template <class V, class D>
void dot(const uint8_t* row, const float* x, int64_t xs, int n_tok, int64_t n, float* out) {
  static constexpr auto kTable = dot_table<V, D>(std::make_integer_sequence<int, V::kMaxTokens>{});
  for (int t0 = 0; t0 < n_tok; t0 += V::kMaxTokens) {
    const int nt = n_tok - t0 < V::kMaxTokens ? n_tok - t0 : V::kMaxTokens;
    kTable[nt - 1](row, x + t0 * xs, xs, n, out + t0);
  }
}

template <class V, class D>
constexpr TypeKernels kKernels{dequantize<V, D>, dot<V, D>};

template <class V>
const TypeKernels* kernels_for(DType t) {
  switch (t) {
    case DType::F32:
      return &kKernels<V, DecF32<V>>;
    case DType::F16:
      return &kKernels<V, DecF16<V>>;
    case DType::BF16:
      return &kKernels<V, DecBF16<V>>;
    case DType::Q8_0:
      return &kKernels<V, DecQ8_0<V>>;
    case DType::Q4_0:
      return &kKernels<V, DecQ4_0<V>>;
    case DType::Q4_1:
      return &kKernels<V, DecQ4_1<V>>;
    case DType::Q4_K:
      return &kKernels<V, DecQ4_K<V>>;
    case DType::Q6_K:
      return &kKernels<V, DecQ6_K<V>>;
  }
  return nullptr;
}

}  // namespace ssd::kernels::detail::simd
