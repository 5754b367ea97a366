// The device attention order (kernels/common/softmax_math.h: warp dot, online softmax over the
// visible positions in call order, split into chunks of kAttnChunk positions merged left to
// right) against the float64 reference of kernels/cpu/attention.h, on prefix + list masks, heads
// of 64, 128 and 80, sequences of 1 to 1500 positions and none, around the chunk boundaries; and
// the split's own promises, exactly: it depends only on the number of positions (a verification
// row equals the decode step), and one chunk is the unsplit walk bit for bit.
//
// Tolerance: 2e-5 * max|v| absolute. The online softmax rescales the accumulator once per new
// maximum; each step adds ~1 ulp relative to the running sum, and with up to 1500 positions and
// float32 accumulators the error measured stays below 3e-6 * max|v|; 2e-5 leaves room for the
// device's expf (2 ulp) and still catches a wrong mask (one missing position among 1500 moves the
// output by ~1e-3) or a wrong scale.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "kernels/common/softmax_math.h"
#include "kernels/cpu/attention.h"
#include "tests/unit/kernels/kernel_test_util.h"

namespace ssd::kernels {
namespace {

struct Case {
  int64_t head_dim, length, prefix;
  std::vector<int64_t> extra;
};

void run_case(const Case& c, std::mt19937& rng, float score_sigma) {
  const auto kv = test::random_floats(2 * c.length * c.head_dim, rng);
  const auto q = test::random_floats(c.head_dim, rng, score_sigma);
  std::vector<const float*> kp(c.length), vp(c.length);
  for (int64_t p = 0; p < c.length; ++p) {
    kp[p] = kv.data() + 2 * p * c.head_dim;
    vp[p] = kp[p] + c.head_dim;
  }
  KvRows rows{kp.data(), vp.data(), c.prefix, c.extra.data(),
              static_cast<int64_t>(c.extra.size()), 0};
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  std::vector<float> want(c.head_dim), got(c.head_dim, 123.0f);
  ref::attention_head(q.data(), rows, c.head_dim, scale, want.data());
  auto pos = [&](int64_t j) { return j < c.prefix ? j : c.extra[j - c.prefix]; };
  hd::attention_query(q.data(), rows.total(), pos, [&](int64_t p) { return kp[p]; },
                      [&](int64_t p) { return vp[p]; }, c.head_dim, scale, got.data());
  float vmax = 0;
  for (float v : kv) vmax = std::max(vmax, std::abs(v));
  for (int64_t d = 0; d < c.head_dim; ++d)
    ASSERT_NEAR(got[d], want[d], 2e-5f * vmax)
        << "head_dim " << c.head_dim << " length " << c.length << " prefix " << c.prefix
        << " extra " << c.extra.size() << " d " << d;
}

TEST(AttentionTwin, MatchesFloat64ReferenceOnMasksAndShapes) {
  std::mt19937 rng(9);
  for (int64_t hd_ : {64, 128, 80}) {
    run_case({hd_, 1, 1, {}}, rng, 1.0f);               // one position
    run_case({hd_, 5, 3, {3, 4}}, rng, 1.0f);           // verification block: causal list
    run_case({hd_, 20, 12, {12, 14, 15, 19}}, rng, 1.0f);  // a tree branch: gaps in the list
    run_case({hd_, 16, 0, {0, 1, 2, 5, 7, 8, 15}}, rng, 1.0f);  // no prefix (Domino block)
    run_case({hd_, 1500, 1497, {1497, 1499}}, rng, 1.0f);      // long context
    run_case({hd_, 300, 300, {}}, rng, 8.0f);  // peaked scores: the maximum moves often
  }
}

TEST(AttentionTwin, ChunkBoundariesStayWithinTheReferenceTolerance) {
  // One position short of, at, and one past each of the first split-K chunk boundaries.
  std::mt19937 rng(21);
  const int64_t c = hd::kAttnChunk;
  for (int64_t len : {c - 1, c, c + 1, 2 * c, 2 * c + 1, 5 * c + 3})
    run_case({64, len, len, {}}, rng, 2.0f);
  EXPECT_EQ(hd::attention_chunks(0), 0);
  EXPECT_EQ(hd::attention_chunks(c), 1);
  EXPECT_EQ(hd::attention_chunks(c + 1), 2);
}

// One query head through attention_query, positions given as a prefix of `prefix` then the list
// [prefix, total): the same positions in the same order for every prefix.
std::vector<float> attend(const std::vector<float>& q, const std::vector<float>& kv, int64_t total,
                          int64_t prefix, int64_t head_dim) {
  std::vector<int64_t> list;
  for (int64_t p = prefix; p < total; ++p) list.push_back(p);
  std::vector<float> out(static_cast<size_t>(head_dim));
  hd::attention_query(
      q.data(), total, [&](int64_t j) { return j < prefix ? j : list[j - prefix]; },
      [&](int64_t p) { return kv.data() + 2 * p * head_dim; },
      [&](int64_t p) { return kv.data() + (2 * p + 1) * head_dim; }, head_dim, 0.125f,
      out.data());
  return out;
}

TEST(AttentionTwin, TheSplitDependsOnlyOnTheNumberOfPositions) {
  // A decode step (every position in the prefix) and a verification row over the same positions
  // (part prefix, part list) must give the same bits: the chunks are cut by position index j,
  // whatever the mask's shape. Across 1, 2 and 6 chunks.
  std::mt19937 rng(22);
  for (int64_t total : {int64_t{100}, hd::kAttnChunk + 40, 5 * hd::kAttnChunk + 7}) {
    const auto kv = test::random_floats(2 * total * 64, rng);
    const auto q = test::random_floats(64, rng, 2.0f);
    const std::vector<float> decode = attend(q, kv, total, total, 64);
    for (int64_t prefix : {int64_t{0}, total / 3, total - 1})
      EXPECT_EQ(attend(q, kv, total, prefix, 64), decode) << "total " << total << " prefix "
                                                          << prefix;
  }
}

TEST(AttentionTwin, OneChunkIsTheUnsplitWalkBitForBit) {
  // Up to kAttnChunk positions the split changes nothing: the result is the single online-softmax
  // stream divided by its sum, written out here as the unsplit kernel ran it.
  std::mt19937 rng(23);
  const int64_t head_dim = 80, total = hd::kAttnChunk;
  const auto kv = test::random_floats(2 * total * head_dim, rng);
  const auto q = test::random_floats(head_dim, rng, 2.0f);
  std::vector<float> want(head_dim, 0.0f);
  hd::OnlineSoftmax st;
  for (int64_t p = 0; p < total; ++p) {
    const float* k = kv.data() + 2 * p * head_dim;
    float alpha = 0, w = 0;
    hd::online_softmax_step(st, hd::warp_dot(q.data(), k, head_dim) * 0.125f, &alpha, &w);
    for (int64_t d = 0; d < head_dim; ++d) want[d] = want[d] * alpha + w * k[head_dim + d];
  }
  for (float& x : want) x = x * (1.0f / st.l);
  EXPECT_EQ(attend(q, kv, total, total, head_dim), want);
}

TEST(AttentionTwin, NoVisiblePositionGivesZeros) {
  std::vector<float> q(80, 1.0f), out(80, 5.0f);
  hd::attention_query(q.data(), 0, [](int64_t j) { return j; },
                      [](int64_t) -> const float* { return nullptr; },
                      [](int64_t) -> const float* { return nullptr; }, 80, 0.1f, out.data());
  for (float v : out) EXPECT_EQ(v, 0.0f);
}

TEST(AttentionTwin, OnlineMergeEqualsOneStream) {
  // Split-K: two halves merged give the single-stream state (to rounding: 1e-6 relative).
  std::mt19937 rng(3);
  const auto s = test::random_floats(101, rng, 5.0f);
  hd::OnlineSoftmax all, a, b;
  float al, p;
  for (float x : s) hd::online_softmax_step(all, x, &al, &p);
  for (size_t i = 0; i < 40; ++i) hd::online_softmax_step(a, s[i], &al, &p);
  for (size_t i = 40; i < s.size(); ++i) hd::online_softmax_step(b, s[i], &al, &p);
  float fa = 0, fb = 0;
  const hd::OnlineSoftmax m = hd::online_softmax_merge(a, b, &fa, &fb);
  EXPECT_EQ(m.m, all.m);
  EXPECT_NEAR(m.l, all.l, 1e-6f * all.l);
  const hd::OnlineSoftmax e = hd::online_softmax_merge(hd::OnlineSoftmax{}, hd::OnlineSoftmax{},
                                                       &fa, &fb);
  EXPECT_EQ(e.l, 0.0f);
  EXPECT_EQ(fa, 0.0f);
}

}  // namespace
}  // namespace ssd::kernels
