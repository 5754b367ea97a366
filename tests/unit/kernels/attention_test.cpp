// The attention kernel (every ISA this CPU runs) against its float64 twin on awkward shapes
// (head_dim 64, 48, 80, 17, 5, 1; 0 .. 300 visible positions, rows scattered in memory as pages
// are), and its exactness properties: the result depends only on the sequence of K/V rows seen,
// bit for bit, not on where the prefix ends, nor on how many heads share the pass over K/V.
//
// Tolerance vs float64: q, k, v ~ N(0, 1) and scale 1/sqrt(head_dim), so a score is a float32
// dot of head_dim terms whose rounding error is at most ~head_dim * 2^-24 * sum|q_d k_d| * scale
// (< 4e-5 for head_dim 80, sum|q k| <= ~1.2 * head_dim in these draws); a probability then
// carries that error relatively (the vector exp adds ~2 ulp), and the output, a convex mix of
// |v| <= ~4.5, carries it absolutely: 4e-5 * 4.5 ~ 2e-4 in the worst case; the observed errors
// are ~10x smaller. We assert 2e-4 absolute.
#include "kernels/cpu/attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "kernel_test_util.h"

namespace ssd::kernels {
namespace {

// `positions` K and V rows of `kv_heads` heads of head_dim, at shuffled places of one buffer.
struct FakeCache : test::ShuffledKvRows {
  FakeCache(int64_t positions, int64_t kv_heads, int64_t head_dim, std::mt19937& rng)
      : ShuffledKvRows(positions, kv_heads * head_dim, rng) {}
};

TEST(Attention, MatchesFloat64TwinOnAwkwardShapes) {
  std::mt19937 rng(11);
  test::IsaGuard guard;
  for (Isa isa : test::runnable_isas()) {
    force_isa(isa);
    for (int64_t head_dim : {64, 48, 80, 17, 5, 1}) {
      for (int64_t total : {0, 1, 2, 3, 15, 16, 17, 33, 130, 300}) {
        FakeCache cache(total + 3, 3, head_dim, rng);
        const auto q = test::random_floats(head_dim, rng);
        // Prefix of about half, then a scattered list (a tree branch).
        KvRows kv;
        kv.k = cache.k.data();
        kv.v = cache.v.data();
        kv.prefix = total / 2;
        std::vector<int64_t> extra;
        for (int64_t p = kv.prefix; p < total + 3; ++p) extra.push_back(p);
        std::shuffle(extra.begin(), extra.end(), rng);
        extra.resize(static_cast<size_t>(total - kv.prefix));
        std::sort(extra.begin(), extra.end());
        ASSERT_EQ(kv.prefix + static_cast<int64_t>(extra.size()), total);
        kv.extra = extra.data();
        kv.n_extra = static_cast<int64_t>(extra.size());
        kv.offset = 2 * head_dim;  // the last of 3 KV heads
        const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
        std::vector<float> out(head_dim, -7.0f), want(head_dim);
        attention_head(q.data(), kv, head_dim, scale, out.data());
        ref::attention_head(q.data(), kv, head_dim, scale, want.data());
        for (int64_t d = 0; d < head_dim; ++d)
          ASSERT_NEAR(out[d], want[d], 2e-4)
              << isa_name(isa) << " head_dim " << head_dim << " total " << total << " d " << d;
        if (total == 0) {
          for (float o : out) ASSERT_EQ(o, 0.0f);
        }
      }
    }
  }
}

// A query that sees positions [0, T) gets the same bits whether the positions come as a prefix,
// as an explicit list, or split anywhere between the two (decode vs verification vs tree).
TEST(Attention, ResultIndependentOfPrefixSplit) {
  std::mt19937 rng(12);
  test::IsaGuard guard;
  for (Isa isa : test::runnable_isas()) {
    force_isa(isa);
    for (int64_t head_dim : {64, 48}) {
      const int64_t total = 37;
      FakeCache cache(total, 1, head_dim, rng);
      const auto q = test::random_floats(head_dim, rng);
      std::vector<int64_t> all(total);
      std::iota(all.begin(), all.end(), 0);
      std::vector<float> first(head_dim), out(head_dim);
      for (int64_t split = 0; split <= total; ++split) {
        KvRows kv{cache.k.data(), cache.v.data(), split, all.data() + split, total - split, 0};
        attention_head(q.data(), kv, head_dim, 0.125f, out.data());
        if (split == 0) first = out;
        for (int64_t d = 0; d < head_dim; ++d)
          ASSERT_TRUE(test::same_float(out[d], first[d]))
              << isa_name(isa) << " split " << split << " d " << d;
      }
    }
  }
}

// A group of G heads sharing a KV head gives each head exactly what it gets alone (the group only
// shares the K/V reads), for G = 1 .. 5 and lengths around the 16-key tiles.
TEST(Attention, GroupOfHeadsEqualsHeadsAlone) {
  std::mt19937 rng(14);
  test::IsaGuard guard;
  for (Isa isa : test::runnable_isas()) {
    force_isa(isa);
    for (int64_t head_dim : {64, 48, 17}) {
      for (int64_t total : {1, 15, 16, 17, 33, 129}) {
        FakeCache cache(total, 2, head_dim, rng);
        KvRows kv{cache.k.data(), cache.v.data(), total, nullptr, 0, head_dim};
        for (int G = 1; G <= 5; ++G) {
          const auto q = test::random_floats(G * head_dim, rng);
          std::vector<float> out(G * head_dim), alone(head_dim);
          std::vector<const float*> qs;
          std::vector<float*> outs;
          for (int h = 0; h < G; ++h) {
            qs.push_back(q.data() + h * head_dim);
            outs.push_back(out.data() + h * head_dim);
          }
          std::vector<float> scratch(attention_scratch_floats(total, head_dim, G));
          attention_heads(qs.data(), outs.data(), G, kv, head_dim, 0.1f, scratch.data());
          for (int h = 0; h < G; ++h) {
            attention_head(qs[h], kv, head_dim, 0.1f, alone.data());
            for (int64_t d = 0; d < head_dim; ++d)
              ASSERT_TRUE(test::same_float(out[h * head_dim + d], alone[d]))
                  << isa_name(isa) << " hd " << head_dim << " total " << total << " G " << G;
          }
        }
      }
    }
  }
}

// Large scores (a peaked softmax) neither overflow nor lose the peak.
TEST(Attention, PeakedSoftmaxPicksTheMatchingValue) {
  std::mt19937 rng(13);
  test::IsaGuard guard;
  for (Isa isa : test::runnable_isas()) {
    force_isa(isa);
    const int64_t head_dim = 48, total = 20;
    FakeCache cache(total, 1, head_dim, rng);
    std::vector<float> q(cache.k[7], cache.k[7] + head_dim);
    for (float& x : q) x *= 1000.0f;  // score of position 7 dominates by thousands
    std::vector<float> out(head_dim);
    KvRows kv{cache.k.data(), cache.v.data(), total, nullptr, 0, 0};
    attention_head(q.data(), kv, head_dim, 1.0f, out.data());
    for (int64_t d = 0; d < head_dim; ++d)
      ASSERT_NEAR(out[d], cache.v[7][d], 1e-6) << isa_name(isa);
  }
}

}  // namespace
}  // namespace ssd::kernels
