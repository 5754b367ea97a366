// Dispatch of the attention kernel, the plain-float version and the float64 reference twin.
// The plain version is written like the SIMD ones (scores, max, exp and sum, then the weighted V
// sum in position order, each head on its own) so that all three have the same exactness
// property.
#include "kernels/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/rowops.h"
#include "runtime/core/error.h"

namespace ssd::kernels {
namespace detail {

AttentionHeadsFn active_attention_heads() {
  switch (active_isa()) {
    case Isa::Amx:
    case Isa::Avx512:
      return attention_heads_avx512;
    case Isa::Avx2:
      return attention_heads_avx2;
    case Isa::Scalar:
      break;
  }
  return attention_heads_scalar;
}

AttentionSlotsFn active_attention_slots() {
  switch (active_isa()) {
    case Isa::Amx:
    case Isa::Avx512:
      return attention_slots_avx512;
    case Isa::Avx2:
      return attention_slots_avx2;
    case Isa::Scalar:
      break;
  }
  return attention_slots_scalar;
}

namespace {

void attention_head_scalar(const float* q, const KvRows& kv, int64_t head_dim, float scale,
                           float* scores, float* out) {
  const int64_t total = kv.total();
  auto pos = [&](int64_t t) { return t < kv.prefix ? t : kv.extra[t - kv.prefix]; };
  float mx = -std::numeric_limits<float>::infinity();
  for (int64_t t = 0; t < total; ++t) {
    const float* k = kv.k[pos(t)] + kv.offset;  // [head_dim]
    float s = 0.0f;
    for (int64_t d = 0; d < head_dim; ++d) s += q[d] * k[d];
    scores[t] = s * scale;
    mx = std::max(mx, scores[t]);
  }
  float sum = 0.0f;
  for (int64_t t = 0; t < total; ++t) {
    scores[t] = std::exp(scores[t] - mx);
    sum += scores[t];
  }
  std::fill(out, out + head_dim, 0.0f);
  for (int64_t t = 0; t < total; ++t) {
    const float* v = kv.v[pos(t)] + kv.offset;  // [head_dim]
    for (int64_t d = 0; d < head_dim; ++d) out[d] += scores[t] * v[d];
  }
  const float inv = total > 0 ? 1.0f / sum : 0.0f;
  for (int64_t d = 0; d < head_dim; ++d) out[d] *= inv;
}

}  // namespace

void attention_heads_scalar(const float* const* q, float* const* out, int G, const KvRows& kv,
                            int64_t head_dim, float scale, float* scratch) {
  for (int h = 0; h < G; ++h) attention_head_scalar(q[h], kv, head_dim, scale, scratch, out[h]);
}

// The plain version shares no work between slots: each runs alone over its own positions.
void attention_slots_scalar(const float* const* q, float* const* out, const int64_t* totals,
                            int S, const KvRows& kv, int64_t head_dim, float scale,
                            float* scratch) {
  for (int s = 0; s < S; ++s)
    attention_head_scalar(q[s], first_positions(kv, totals[s]), head_dim, scale, scratch, out[s]);
}

}  // namespace detail

KvRows first_positions(const KvRows& kv, int64_t total) {
  KvRows cut = kv;
  cut.prefix = std::min(kv.prefix, total);
  cut.n_extra = total - cut.prefix;
  return cut;
}

int64_t attention_slots_scratch_floats(int64_t total, int64_t head_dim, int S) {
  // [S, total rounded to 16] scores + [S, 2, head_dim rounded to 16] partial sums + [S] 1/sums
  return int64_t{S} * ((total + 15) / 16 * 16 + 2 * ((head_dim + 15) / 16 * 16) + 1);
}

void attention_slots(const float* const* q, float* const* out, const int64_t* totals, int S,
                     const KvRows& kv, int64_t head_dim, float scale, float* scratch) {
  SSD_CHECK(S >= 0 && S <= 1024, "attention: {} query slots in one pass (0..1024 supported)", S);
  for (int s = 0; s < S; ++s)
    SSD_CHECK(totals[s] >= 0 && totals[s] <= (s == 0 ? kv.total() : totals[s - 1]),
              "attention: slot {} sees {} positions (non-increasing, at most {} expected)", s,
              totals[s], s == 0 ? kv.total() : totals[s - 1]);
  detail::active_attention_slots()(q, out, totals, S, kv, head_dim, scale, scratch);
}

int64_t attention_scratch_floats(int64_t total, int64_t head_dim, int G) {
  // [G, total rounded to 16] scores + [G, 2, head_dim rounded to 16] partial sums
  return int64_t{G} * ((total + 15) / 16 * 16 + 2 * ((head_dim + 15) / 16 * 16));
}

void attention_heads(const float* const* q, float* const* out, int G, const KvRows& kv,
                     int64_t head_dim, float scale, float* scratch) {
  SSD_CHECK(G >= 1 && G <= 64, "attention: {} query heads per KV head (1..64 supported)", G);
  detail::active_attention_heads()(q, out, G, kv, head_dim, scale, scratch);
}

void attention_head(const float* q, const KvRows& kv, int64_t head_dim, float scale,
                    float* out) {
  const int64_t floats = attention_scratch_floats(kv.total(), head_dim, 1);
  std::vector<float> scratch(static_cast<size_t>(floats));
  attention_heads(&q, &out, 1, kv, head_dim, scale, scratch.data());
}

namespace ref {

void attention_head(const float* q, const KvRows& kv, int64_t head_dim, float scale, float* out) {
  const int64_t total = kv.total();
  std::vector<double> s(static_cast<size_t>(total));
  double mx = -std::numeric_limits<double>::infinity();
  for (int64_t t = 0; t < total; ++t) {
    const int64_t p = t < kv.prefix ? t : kv.extra[t - kv.prefix];
    const float* k = kv.k[p] + kv.offset;
    double dot = 0.0;
    for (int64_t d = 0; d < head_dim; ++d) dot += static_cast<double>(q[d]) * k[d];
    s[t] = dot * scale;
    mx = std::max(mx, s[t]);
  }
  double sum = 0.0;
  for (double& v : s) sum += v = std::exp(v - mx);
  for (int64_t d = 0; d < head_dim; ++d) {
    double acc = 0.0;
    for (int64_t t = 0; t < total; ++t) {
      const int64_t p = t < kv.prefix ? t : kv.extra[t - kv.prefix];
      acc += s[t] * static_cast<double>(kv.v[p][kv.offset + d]);
    }
    out[d] = total > 0 ? static_cast<float>(acc / sum) : 0.0f;
  }
}

}  // namespace ref
}  // namespace ssd::kernels
