// Softmax pieces shared by the device attention / sampling kernels and their CPU twins: the
// online-softmax update (one pass over the scores, rescaling the running sum and accumulator
// when the maximum grows), the warp dot product order, and a whole-row softmax in the device's
// order.
//
// Attention on the device (kernels/cuda/attention.cu) runs one warp per (query, head): lane l
// owns dimensions l, l + 32, l + 64, ... of the head; a score is each lane's partial dot over its
// dimensions, then a butterfly over the 32 lanes (xor 16, 8, 4, 2, 1). Addition is commutative,
// so every lane ends with the same bits. The visible positions are visited in the order the
// AttentionCall lists them ([0, prefix) then the visible list), one online-softmax step each, so
// a query's output depends on its q and the K/V it sees, never on the batch (the property greedy
// speculative decoding needs). warp_dot() and attention_query() below are that order on the
// host. They are not bitwise equal to the CPU backend (a different, SIMD order and a polynomial
// exp); the twin tests hold both to the float64 reference within stated tolerances.
//
// Split-K (flash-decoding) for long contexts: a query's visible positions j = 0 .. total - 1
// (in call order) are cut into chunks of kAttnChunk consecutive j; each chunk is its own
// online-softmax stream (its own m, l and unnormalised accumulator, on its own warp), and the
// chunks are merged left to right (chunk 0, then 1, 2, ...: online_softmax_merge, accumulators
// acc = acc * fa + acc_c * fb), then divided by l. One chunk (total <= kAttnChunk) is that
// stream's acc / l with no merge: the order of the unsplit walk. The split depends only on
// total, never on the batch or on which other queries run, so a verification row still equals
// the decode step at its position bit for bit.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/common/hd.h"
#include "kernels/common/row_math.h"

namespace ssd::kernels::hd {

inline constexpr int kWarp = 32;
inline constexpr int64_t kAttnChunk = 128;  // positions per split-K chunk (see above)

// Chunks of a query that sees `total` positions (0 for none).
SSD_HD constexpr int64_t attention_chunks(int64_t total) {
  return (total + kAttnChunk - 1) / kAttnChunk;
}
// -inf without <limits> (numeric_limits is not callable from device code).
inline constexpr float kNegInf = -__builtin_huge_valf();

// Running state of a softmax-weighted sum over a stream of scores.
struct OnlineSoftmax {
  float m = kNegInf;  // max score so far
  float l = 0.0f;                                     // sum of exp(score - m)
};

// One score: updates the state and returns (alpha, p): the factor to rescale the accumulator by
// and the weight of this score's value row (acc = acc * alpha + p * v).
SSD_HD void online_softmax_step(OnlineSoftmax& st, float score, float* alpha, float* p) {
  const float m_new = score > st.m ? score : st.m;
  *alpha = exp_f(st.m - m_new);  // exp(-inf) = 0 on the first step
  *p = exp_f(score - m_new);
  st.l = st.l * *alpha + *p;
  st.m = m_new;
}

// Merges two partial states (split-K attention over position ranges); returns the factors for
// the two accumulators. Either side may be empty (m = -inf, l = 0).
SSD_HD OnlineSoftmax online_softmax_merge(const OnlineSoftmax& a, const OnlineSoftmax& b,
                                          float* fa, float* fb) {
  OnlineSoftmax r;
  r.m = a.m > b.m ? a.m : b.m;
  if (r.m == kNegInf) {
    *fa = *fb = 0.0f;
    return r;
  }
  *fa = exp_f(a.m - r.m);
  *fb = exp_f(b.m - r.m);
  r.l = a.l * *fa + b.l * *fb;
  return r;
}

// q . k over head_dim values in the warp's order (see the top of the file).
inline float warp_dot(const float* q, const float* k, int64_t head_dim) {
  float lane[kWarp];
  for (int l = 0; l < kWarp; ++l) {
    float acc = 0.0f;
    for (int64_t d = l; d < head_dim; d += kWarp) acc = acc + q[d] * k[d];
    lane[l] = acc;
  }
  for (int o = kWarp / 2; o > 0; o /= 2) {
    float next[kWarp];
    for (int l = 0; l < kWarp; ++l) next[l] = lane[l] + lane[l ^ o];
    for (int l = 0; l < kWarp; ++l) lane[l] = next[l];
  }
  return lane[0];
}

// The device attention of one query head, on the host, split into chunks and merged as the
// device does (see the top of the file): positions p = pos(0..total) with K/V rows key(p),
// value(p) ([head_dim] each). out: [head_dim]; zeros when total == 0.
template <class PosFn, class KFn, class VFn>
void attention_query(const float* q, int64_t total, PosFn&& pos, KFn&& key, VFn&& value,
                     int64_t head_dim, float scale, float* out) {
  for (int64_t d = 0; d < head_dim; ++d) out[d] = 0.0f;
  if (total == 0) return;
  std::vector<float> part(static_cast<size_t>(head_dim));  // [head_dim] one chunk's accumulator
  OnlineSoftmax st;
  for (int64_t c = 0; c < attention_chunks(total); ++c) {
    OnlineSoftmax sc;
    for (int64_t d = 0; d < head_dim; ++d) part[d] = 0.0f;
    const int64_t end = (c + 1) * kAttnChunk < total ? (c + 1) * kAttnChunk : total;
    for (int64_t j = c * kAttnChunk; j < end; ++j) {
      const int64_t p = pos(j);
      const float s = warp_dot(q, key(p), head_dim) * scale;
      float alpha = 0, w = 0;
      online_softmax_step(sc, s, &alpha, &w);
      const float* v = value(p);
      for (int64_t d = 0; d < head_dim; ++d) part[d] = part[d] * alpha + w * v[d];
    }
    if (c == 0) {
      st = sc;
      for (int64_t d = 0; d < head_dim; ++d) out[d] = part[d];
      continue;
    }
    float fa = 0, fb = 0;
    st = online_softmax_merge(st, sc, &fa, &fb);
    for (int64_t d = 0; d < head_dim; ++d) out[d] = out[d] * fa + part[d] * fb;
  }
  const float inv = 1.0f / st.l;
  for (int64_t d = 0; d < head_dim; ++d) out[d] = out[d] * inv;
}

}  // namespace ssd::kernels::hd
