// Internal to kernels/cpu: the SIMD attention kernel, written once over a vector-traits struct V
// and instantiated by attention_avx2.cpp and attention_avx512.cpp (each compiled with its own
// instruction set; everything here has internal linkage).
//
// V provides: reg, width, dot_slots (query slots sharing one load of 4 K rows), pair_regs
// (head_dim registers per block when two slots share the V loads), zero, set1, load, load_n
// (first n lanes, others 0), store, store_n, fmadd, add, sub, mul, max, reduce_add, reduce_max,
// reduce4 (four horizontal sums at once), exp, and lanes_below(n) to mask a tail.
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
//
// The rows of a causal block (attention_slots_simd) share one pass: row i sees the first
// prefix + i + 1 positions of the last row's, so every (row, head) slot runs the three passes
// above over its own first positions, with exactly a lone head's operations, while the loads
// are shared: 4 K rows feed the dot products of dot_slots slots, a V row feeds the sums of two
// slots, and a tile of 64 keys is used by every slot that sees it while it is in L1. A slot's
// bits are those of attention_heads_simd for that head alone (tests/unit/kernels/
// attention_slots_test.cpp checks it bit for bit on every ISA).
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

// Register r of a block of NR registers at floats [d0, d0 + NR*W) of a head_dim row; with TAIL
// the last register holds only `last` valid lanes (the others load as 0 and are not stored).
template <class V, int NR, bool TAIL>
struct BlockLanes {
  int64_t d0;
  int last;
  typename V::reg load(const float* v, int r) const {
    if constexpr (TAIL) {
      if (r == NR - 1) return V::load_n(v + d0 + r * V::width, last);
    }
    return V::load(v + d0 + r * V::width);
  }
  void store(float* v, int r, typename V::reg x) const {
    if (TAIL && r == NR - 1)
      V::store_n(v + d0 + r * V::width, x, last);
    else
      V::store(v + d0 + r * V::width, x);
  }
};

// Continues the per-lane sums even[d] += p_t v_t[d] (t even) and odd[d] += p_t v_t[d] (t odd)
// over keys [t_begin, t_end) (t_begin even) for d in [d0, d0 + NR*W); with TAIL the last register
// holds only `last` valid lanes. The partial sums live in memory between calls (acc_even,
// acc_odd: [head_dim]) and in registers during one: storing a float and loading it back does not
// change it, so splitting the keys into blocks gives exactly the sums of one pass. NR and TAIL
// are compile-time so that the accumulators stay in registers.
template <class V, int NR, bool TAIL, class RowOf>
inline void weighted_sum_block(const float* p, int64_t t_begin, int64_t t_end, RowOf row_of,
                               int64_t d0, int last, float* acc_even, float* acc_odd) {
  const BlockLanes<V, NR, TAIL> lanes{d0, last};
  auto load = [&](const float* v, int r) { return lanes.load(v, r); };
  auto store = [&](float* v, int r, typename V::reg x) { lanes.store(v, r, x); };
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

// weighted_sum_block for two slots a and b over the same keys [t_begin, t_end): each V register
// loaded once serves both; per slot the same FMAs in the same order as weighted_sum_block.
template <class V, int NR, bool TAIL, class RowOf>
inline void weighted_sum_block2(const float* pa, const float* pb, int64_t t_begin, int64_t t_end,
                                RowOf row_of, int64_t d0, int last, float* const acc[4]) {
  const BlockLanes<V, NR, TAIL> lanes{d0, last};
  auto load = [&](const float* v, int r) { return lanes.load(v, r); };
  auto store = [&](float* v, int r, typename V::reg x) { lanes.store(v, r, x); };
  typename V::reg ea[NR], oa[NR], eb[NR], ob[NR];
#pragma GCC unroll 4
  for (int r = 0; r < NR; ++r) {
    ea[r] = load(acc[0], r);
    oa[r] = load(acc[1], r);
    eb[r] = load(acc[2], r);
    ob[r] = load(acc[3], r);
  }
  int64_t t = t_begin;
  for (; t + 2 <= t_end; t += 2) {
    const float* v0 = row_of(t);
    const float* v1 = row_of(t + 1);
    const auto a0 = V::set1(pa[t]), a1 = V::set1(pa[t + 1]);
    const auto b0 = V::set1(pb[t]), b1 = V::set1(pb[t + 1]);
#pragma GCC unroll 4
    for (int r = 0; r < NR; ++r) {
      const auto x0 = load(v0, r), x1 = load(v1, r);
      ea[r] = V::fmadd(a0, x0, ea[r]);
      oa[r] = V::fmadd(a1, x1, oa[r]);
      eb[r] = V::fmadd(b0, x0, eb[r]);
      ob[r] = V::fmadd(b1, x1, ob[r]);
    }
  }
  if (t < t_end) {
    const float* v0 = row_of(t);
    const auto a0 = V::set1(pa[t]), b0 = V::set1(pb[t]);
#pragma GCC unroll 4
    for (int r = 0; r < NR; ++r) {
      const auto x0 = load(v0, r);
      ea[r] = V::fmadd(a0, x0, ea[r]);
      eb[r] = V::fmadd(b0, x0, eb[r]);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < NR; ++r) {
    store(acc[0], r, ea[r]);
    store(acc[1], r, oa[r]);
    store(acc[2], r, eb[r]);
    store(acc[3], r, ob[r]);
  }
}

// weighted_sum_block2 over the whole head_dim, register blocks of up to V::pair_regs (the
// blocking over head_dim does not change a lane's sum).
template <class V, class RowOf>
inline void weighted_sum_range2(const float* pa, const float* pb, int64_t t_begin, int64_t t_end,
                                RowOf row_of, int64_t head_dim, float* const acc[4]) {
  constexpr int W = V::width;
  constexpr int MR = V::pair_regs;
  for (int64_t d0 = 0; d0 < head_dim; d0 += MR * W) {
    const int64_t left = head_dim - d0;
    const int nr = static_cast<int>(std::min<int64_t>(MR, (left + W - 1) / W));
    const int last = static_cast<int>(std::min<int64_t>(W, left - int64_t{nr - 1} * W));
#define SSD_WSUM2(NR)                                                                     \
  (last == W ? weighted_sum_block2<V, NR, false>(pa, pb, t_begin, t_end, row_of, d0, last, acc) \
             : weighted_sum_block2<V, NR, true>(pa, pb, t_begin, t_end, row_of, d0, last, acc))
    if constexpr (MR >= 4) {
      if (nr == 4)
        SSD_WSUM2(4);
      else if (nr == 3)
        SSD_WSUM2(3);
    }
    if (nr == 2)
      SSD_WSUM2(2);
    else if (nr == 1)
      SSD_WSUM2(1);
#undef SSD_WSUM2
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

// Keys of a V-sum tile in attention_slots_simd: the tile's V rows (16 KB at head_dim 64) and
// the live slots' partial sums stay in L1 while every slot uses them. Splitting the keys into
// even-sized tiles does not change a sum (weighted_sum_block), so this can differ from
// kTileKeys; 64 was the fastest of 16, 32, 64 and 128 for 36 slots over 1000 keys.
constexpr int64_t kSlotTileKeys = 64;

// dot4_simd for NS query slots over the same 4 keys: each K register is loaded once for all NS
// slots, and each slot gets exactly dot4_simd's operations (same FMAs in the same order, same
// reduce4), so its 4 scores are the bits dot4_simd gives it. scores[s][0..3] receives slot s's.
template <class V, int NS>
inline void dot4_slots(const float* const* q, const float* const k[4], int64_t head_dim,
                       float scale, float* const* scores) {
  constexpr int W = V::width;
  typename V::reg a[NS][4];
#pragma GCC unroll 8
  for (int s = 0; s < NS; ++s) a[s][0] = a[s][1] = a[s][2] = a[s][3] = V::zero();
  int64_t d = 0;
  for (; d + W <= head_dim; d += W) {
    const auto k0 = V::load(k[0] + d), k1 = V::load(k[1] + d), k2 = V::load(k[2] + d),
               k3 = V::load(k[3] + d);
#pragma GCC unroll 8
    for (int s = 0; s < NS; ++s) {
      const auto x = V::load(q[s] + d);
      a[s][0] = V::fmadd(x, k0, a[s][0]);
      a[s][1] = V::fmadd(x, k1, a[s][1]);
      a[s][2] = V::fmadd(x, k2, a[s][2]);
      a[s][3] = V::fmadd(x, k3, a[s][3]);
    }
  }
  if (d < head_dim) {
    const int n = static_cast<int>(head_dim - d);
    const auto k0 = V::load_n(k[0] + d, n), k1 = V::load_n(k[1] + d, n),
               k2 = V::load_n(k[2] + d, n), k3 = V::load_n(k[3] + d, n);
#pragma GCC unroll 8
    for (int s = 0; s < NS; ++s) {
      const auto x = V::load_n(q[s] + d, n);
      a[s][0] = V::fmadd(x, k0, a[s][0]);
      a[s][1] = V::fmadd(x, k1, a[s][1]);
      a[s][2] = V::fmadd(x, k2, a[s][2]);
      a[s][3] = V::fmadd(x, k3, a[s][3]);
    }
  }
#pragma GCC unroll 8
  for (int s = 0; s < NS; ++s) {
    float r[4];
    V::reduce4(a[s][0], a[s][1], a[s][2], a[s][3], r);
    for (int j = 0; j < 4; ++j) scores[s][j] = r[j] * scale;
  }
}

// S query slots over one pass of the K/V rows of kv, slot s seeing the first totals[s] of kv's
// positions (totals non-increasing, totals[0] <= kv.total()): the rows of a causal block, each
// with the heads of one KV head. Per slot exactly the operations of attention_heads_simd for a
// lone head over its own positions: the same dot4 groups (a slot whose total ends inside a group
// gets the group's real keys in the lanes past its total instead of repeats of the first key;
// a lane's score depends on its own key only, and those lanes are never read), the same softmax
// over its own total, the same tiles of 16 keys for the V sums, its last tile ending at its
// total. So a slot's result is bit for bit what attention_heads gives that head alone, whatever
// the other slots are. The K rows of a group of 4 keys are loaded once for all slots and the V
// rows of a tile used by all slots while in L1; each slot drops out after its last key.
// scratch: attention_slots_scratch_floats() floats.
template <class V>
void attention_slots_simd(const float* const* q, float* const* out, const int64_t* totals,
                          int S, const KvRows& kv, int64_t head_dim, float scale,
                          float* scratch) {
  constexpr int W = V::width;
  constexpr int NS = V::dot_slots;  // slots sharing one load of 4 K rows
  const int64_t longest = S > 0 ? totals[0] : 0;
  const int64_t stride = (longest + 15) / 16 * 16;   // scores of one slot
  const int64_t hd_pad = (head_dim + 15) / 16 * 16;  // accumulators of one slot
  float* scores = scratch;                            // [S, stride]
  float* acc = scratch + S * stride;                  // [S, 2, hd_pad]
  float* inv = acc + S * 2 * hd_pad;                  // [S]
  auto live = [&](int64_t t0) {  // slots that see position t0: a prefix of the slots
    int n = 0;
    while (n < S && totals[n] > t0) ++n;
    return n;
  };
  auto at = [&](int64_t t) { return t < kv.prefix ? t : kv.extra[t - kv.prefix]; };

  // 1. scores, four keys at a time for every slot that sees the group's first key (the
  //    longest slot's last group padded with repeats of its first key); all 4 lanes are stored,
  //    the row has room (stride is a multiple of 16)
  int n_live = S;
  for (int64_t t0 = 0; t0 < longest; t0 += 4) {
    const float* k[4];
    for (int j = 0; j < 4; ++j) k[j] = kv.k[at(t0 + j < longest ? t0 + j : t0)] + kv.offset;
    n_live = live(t0);
    float* dst[NS];
    int s = 0;
    for (; s + NS <= n_live; s += NS) {
      for (int j = 0; j < NS; ++j) dst[j] = scores + (s + j) * stride + t0;
      dot4_slots<V, NS>(q + s, k, head_dim, scale, dst);
    }
    for (; s < n_live; ++s) {
      dst[0] = scores + s * stride + t0;
      dot4_slots<V, 1>(q + s, k, head_dim, scale, dst);
    }
  }

  // 2. softmax numerators and their sums, each slot over its own positions
  for (int s = 0; s < S; ++s)
    inv[s] = totals[s] > 0 ? softmax_numerators<V>(scores + s * stride, totals[s]) : 0.0f;

  // 3. weighted sums of V, tile by tile of keys, every slot that sees the tile per tile
  std::fill(acc, acc + S * 2 * hd_pad, 0.0f);
  const float* vrow[kSlotTileKeys];
  for (int64_t t0 = 0; t0 < longest; t0 += kSlotTileKeys) {
    const int64_t t1 = std::min(longest, t0 + kSlotTileKeys);
    for (int64_t t = t0; t < t1; ++t) vrow[t - t0] = kv.v[at(t)] + kv.offset;
    auto row_of = [&](int64_t t) { return vrow[t - t0]; };
    n_live = live(t0);
    for (int s = 0; s < n_live;) {
      const int64_t end = std::min(t1, totals[s]);
      if (s + 1 < n_live && std::min(t1, totals[s + 1]) == end) {  // e.g. two heads of a row
        float* const pair_acc[4] = {acc + (2 * s) * hd_pad, acc + (2 * s + 1) * hd_pad,
                                    acc + (2 * s + 2) * hd_pad, acc + (2 * s + 3) * hd_pad};
        weighted_sum_range2<V>(scores + s * stride, scores + (s + 1) * stride, t0, end, row_of,
                               head_dim, pair_acc);
        s += 2;
      } else {
        weighted_sum_range<V>(scores + s * stride, t0, end, row_of, head_dim,
                              acc + (2 * s) * hd_pad, acc + (2 * s + 1) * hd_pad);
        s += 1;
      }
    }
  }
  for (int s = 0; s < S; ++s) {
    if (totals[s] == 0) {
      std::fill(out[s], out[s] + head_dim, 0.0f);
      continue;
    }
    const float* even = acc + (2 * s) * hd_pad;
    const float* odd = acc + (2 * s + 1) * hd_pad;
    const auto sc = V::set1(inv[s]);
    int64_t d = 0;
    for (; d + W <= head_dim; d += W)
      V::store(out[s] + d, V::mul(V::add(V::load(even + d), V::load(odd + d)), sc));
    if (d < head_dim) {
      const int n = static_cast<int>(head_dim - d);
      V::store_n(out[s] + d,
                 V::mul(V::add(V::load_n(even + d, n), V::load_n(odd + d, n)), sc), n);
    }
  }
}

}  // namespace
}  // namespace ssd::kernels
