// Internal to kernels/cpu: the SIMD attention kernel, written once over a vector-traits struct V
// and instantiated by attention_avx2.cpp and attention_avx512.cpp (each compiled with its own
// instruction set; everything here has internal linkage).
//
// V provides: reg, width, zero, set1, load, load_n (first n lanes, others 0), store, store_n,
// fmadd, add, sub, mul, max, reduce_add, reduce_max, reduce4 (four horizontal sums at once), exp,
// and lanes_below(n) to mask a tail.
//
// Passes over the visible positions t = 0 .. total-1 (prefix first, then the explicit list):
//   1. scores[t] = scale * (q . k_t): SIMD dots over head_dim for four keys at a time, their
//      horizontal sums done together (a quarter of the shuffles of one sum per key);
//   2. m = max_t scores[t]; scores[t] = exp(scores[t] - m); sum = sum_t scores[t], summed in
//      W lanes (lane = t mod W) then across lanes;
//   3. out = (sum_t scores[t] v_t) / sum, head_dim in blocks of up to 4 registers held across
//      a tile of 16 keys, two accumulator sets (even t, odd t) for instruction-level
//      parallelism; the partial sums go to memory between tiles so that all heads of a group
//      use a tile of V rows while it is in L1.
// Every grouping depends on t and head_dim only, never on where the prefix ends, on other
// queries or on the other heads of a group, which is what makes a batched verification bitwise
// equal to single-token decodes.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>

#include "kernels/cpu/attention.h"

namespace ssd::kernels {
namespace {

// scores[j] = scale * (q . k_j) for the 4 keys k[0..3] (head_dim floats each): four register
// accumulators, then one 4-way horizontal sum (V::reduce4) whose adding order is the same for
// each of the four slots, so a key's score does not depend on the slot it lands in.
template <class V>
inline void dot4_simd(const float* q, const float* const k[4], int64_t head_dim, float scale,
                      float* scores) {
  constexpr int W = V::width;
  auto a0 = V::zero(), a1 = V::zero(), a2 = V::zero(), a3 = V::zero();
  int64_t d = 0;
  for (; d + W <= head_dim; d += W) {
    const auto x = V::load(q + d);
    a0 = V::fmadd(x, V::load(k[0] + d), a0);
    a1 = V::fmadd(x, V::load(k[1] + d), a1);
    a2 = V::fmadd(x, V::load(k[2] + d), a2);
    a3 = V::fmadd(x, V::load(k[3] + d), a3);
  }
  if (d < head_dim) {
    const int n = static_cast<int>(head_dim - d);
    const auto x = V::load_n(q + d, n);
    a0 = V::fmadd(x, V::load_n(k[0] + d, n), a0);
    a1 = V::fmadd(x, V::load_n(k[1] + d, n), a1);
    a2 = V::fmadd(x, V::load_n(k[2] + d, n), a2);
    a3 = V::fmadd(x, V::load_n(k[3] + d, n), a3);
  }
  float s[4];
  V::reduce4(a0, a1, a2, a3, s);
  for (int j = 0; j < 4; ++j) scores[j] = s[j] * scale;
}

// Continues the per-lane sums even[d] += p_t v_t[d] (t even) and odd[d] += p_t v_t[d] (t odd)
// over keys [t_begin, t_end) (t_begin even) for d in [d0, d0 + NR*W); with TAIL the last register
// holds only `last` valid lanes. The partial sums live in memory between calls (acc_even,
// acc_odd: [head_dim]) and in registers during one: storing a float and loading it back does not
// change it, so splitting the keys into blocks gives exactly the sums of one pass. NR and TAIL
// are compile-time so that the accumulators stay in registers.
template <class V, int NR, bool TAIL, class RowOf>
inline void weighted_sum_block(const float* p, int64_t t_begin, int64_t t_end, RowOf row_of,
                               int64_t d0, int last, float* acc_even, float* acc_odd) {
  constexpr int W = V::width;
  auto load = [&](const float* v, int r) {
    if constexpr (TAIL) {
      if (r == NR - 1) return V::load_n(v + d0 + r * W, last);
    }
    return V::load(v + d0 + r * W);
  };
  auto store = [&](float* v, int r, typename V::reg x) {
    if (TAIL && r == NR - 1)
      V::store_n(v + d0 + r * W, x, last);
    else
      V::store(v + d0 + r * W, x);
  };
  typename V::reg even[NR], odd[NR];
#pragma GCC unroll 4
  for (int r = 0; r < NR; ++r) {
    even[r] = load(acc_even, r);
    odd[r] = load(acc_odd, r);
  }
  int64_t t = t_begin;
  for (; t + 2 <= t_end; t += 2) {
    const float* v0 = row_of(t);
    const float* v1 = row_of(t + 1);
    const auto p0 = V::set1(p[t]), p1 = V::set1(p[t + 1]);
#pragma GCC unroll 4
    for (int r = 0; r < NR; ++r) {
      even[r] = V::fmadd(p0, load(v0, r), even[r]);
      odd[r] = V::fmadd(p1, load(v1, r), odd[r]);
    }
  }
  if (t < t_end) {
    const float* v0 = row_of(t);
    const auto p0 = V::set1(p[t]);
#pragma GCC unroll 4
    for (int r = 0; r < NR; ++r) even[r] = V::fmadd(p0, load(v0, r), even[r]);
  }
#pragma GCC unroll 4
  for (int r = 0; r < NR; ++r) {
    store(acc_even, r, even[r]);
    store(acc_odd, r, odd[r]);
  }
}

// weighted_sum_block over the whole head_dim, register blocks of up to 4 chosen at run time.
template <class V, class RowOf>
inline void weighted_sum_range(const float* p, int64_t t_begin, int64_t t_end, RowOf row_of,
                               int64_t head_dim, float* acc_even, float* acc_odd) {
  constexpr int W = V::width;
  for (int64_t d0 = 0; d0 < head_dim; d0 += 4 * W) {
    const int64_t left = head_dim - d0;
    const int nr = static_cast<int>(std::min<int64_t>(4, (left + W - 1) / W));
    const int last = static_cast<int>(std::min<int64_t>(W, left - int64_t{nr - 1} * W));
#define SSD_WSUM(NR)                                                                      \
  (last == W ? weighted_sum_block<V, NR, false>(p, t_begin, t_end, row_of, d0, last,      \
                                                acc_even, acc_odd)                        \
             : weighted_sum_block<V, NR, true>(p, t_begin, t_end, row_of, d0, last, acc_even, \
                                               acc_odd))
    switch (nr) {
      case 4:
        SSD_WSUM(4);
        break;
      case 3:
        SSD_WSUM(3);
        break;
      case 2:
        SSD_WSUM(2);
        break;
      default:
        SSD_WSUM(1);
        break;
    }
#undef SSD_WSUM
  }
}

// Scores of one head turned into softmax numerators in place; returns 1 / their sum.
template <class V>
inline float softmax_numerators(float* scores, int64_t total) {
  constexpr int W = V::width;
  auto mxv = V::set1(-std::numeric_limits<float>::infinity());
  int64_t t = 0;
  for (; t + W <= total; t += W) mxv = V::max(mxv, V::load(scores + t));
  float mx = V::reduce_max(mxv);
  for (; t < total; ++t) mx = std::max(mx, scores[t]);
  const auto m = V::set1(mx);
  auto sumv = V::zero();
  for (t = 0; t + W <= total; t += W) {
    const auto e = V::exp(V::sub(V::load(scores + t), m));
    V::store(scores + t, e);
    sumv = V::add(sumv, e);
  }
  if (t < total) {
    const int n = static_cast<int>(total - t);
    const auto e = V::lanes_below(V::exp(V::sub(V::load_n(scores + t, n), m)), n);
    V::store_n(scores + t, e, n);
    sumv = V::add(sumv, e);
  }
  return 1.0f / V::reduce_add(sumv);
}

// Keys of a V-sum block: the K/V rows of kTileKeys keys stay in L1 while every head of a group
// uses them (a group's rows at 128+ positions do not fit L1; without the tiling each head
// fetched them from L2 again). Even, so that the even/odd split of a block matches one pass.
constexpr int64_t kTileKeys = 16;

// G query heads reading the same KV head at one query position. Per head exactly the operations
// of a lone head (so its bits do not depend on G); the heads only share the K/V rows, each tile
// of which is read from L2 once for all of them. scratch: attention_scratch_floats() floats.
template <class V>
void attention_heads_simd(const float* const* q, float* const* out, int G, const KvRows& kv,
                          int64_t head_dim, float scale, float* scratch) {
  constexpr int W = V::width;
  const int64_t total = kv.total();
  if (total == 0) {
    for (int h = 0; h < G; ++h) std::fill(out[h], out[h] + head_dim, 0.0f);
    return;
  }
  const int64_t stride = (total + 15) / 16 * 16;   // scores of one head
  const int64_t hd_pad = (head_dim + 15) / 16 * 16;  // accumulators of one head
  float* scores = scratch;                           // [G, stride]
  float* acc = scratch + G * stride;                 // [G, 2, hd_pad]

  // 1. scores, four keys at a time for every head (the last group padded with repeats of its
  //    first key, whose extra scores are dropped)
  auto key_of = [&](int64_t i) {
    return (i < kv.prefix ? kv.k[i] : kv.k[kv.extra[i - kv.prefix]]) + kv.offset;
  };
  for (int64_t t0 = 0; t0 < total; t0 += 4) {
    const float* k[4];
    for (int j = 0; j < 4; ++j) k[j] = key_of(t0 + j < total ? t0 + j : t0);
    for (int h = 0; h < G; ++h) {
      float* s = scores + h * stride;
      if (t0 + 4 <= total) {
        dot4_simd<V>(q[h], k, head_dim, scale, s + t0);
      } else {
        float s4[4];
        dot4_simd<V>(q[h], k, head_dim, scale, s4);
        for (int64_t j = 0; t0 + j < total; ++j) s[t0 + j] = s4[j];
      }
    }
  }

  // 2. softmax numerators and their sums
  float inv[64];
  for (int h = 0; h < G; ++h) inv[h] = softmax_numerators<V>(scores + h * stride, total);

  // 3. weighted sums of V, tile by tile of keys, every head per tile
  auto row_of = [&](int64_t i) {
    return (i < kv.prefix ? kv.v[i] : kv.v[kv.extra[i - kv.prefix]]) + kv.offset;
  };
  std::fill(acc, acc + G * 2 * hd_pad, 0.0f);
  for (int64_t t0 = 0; t0 < total; t0 += kTileKeys) {
    const int64_t t1 = std::min(total, t0 + kTileKeys);
    for (int h = 0; h < G; ++h)
      weighted_sum_range<V>(scores + h * stride, t0, t1, row_of, head_dim,
                            acc + (2 * h) * hd_pad, acc + (2 * h + 1) * hd_pad);
  }
  for (int h = 0; h < G; ++h) {
    const float* even = acc + (2 * h) * hd_pad;
    const float* odd = acc + (2 * h + 1) * hd_pad;
    const auto s = V::set1(inv[h]);
    int64_t d = 0;
    for (; d + W <= head_dim; d += W)
      V::store(out[h] + d, V::mul(V::add(V::load(even + d), V::load(odd + d)), s));
    if (d < head_dim) {
      const int n = static_cast<int>(head_dim - d);
      V::store_n(out[h] + d,
                 V::mul(V::add(V::load_n(even + d, n), V::load_n(odd + d, n)), s), n);
    }
  }
}

}  // namespace
}  // namespace ssd::kernels
