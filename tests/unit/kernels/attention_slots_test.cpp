// attention_slots (the rows of a causal block in one pass over K/V) on every ISA this CPU runs:
// each slot's result is bit for bit what the single-query kernel (attention_heads) gives it
// alone over its own first positions, whatever the other slots see, and within 2e-4 absolute of
// the float64 twin (the tolerance derived in attention_test.cpp). Shapes: head_dim 64 and the
// awkward 40, 72, 17; slot totals around the 4-key groups and 16-key tiles (0, 1, 2, 3, 4, 5,
// 15, 16, 17, 33, 130); the positions a prefix then a scattered list, rows scattered in memory.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/cpu/attention.h"

namespace ssd::kernels {
namespace {

using Rows = test::ShuffledKvRows;

bool same_bits(const float* a, const float* b, int64_t n) {
  return std::memcmp(a, b, sizeof(float) * static_cast<size_t>(n)) == 0;
}

// Runs the slots of `totals` (non-increasing) in one pass and checks each against the kernel
// alone and the float64 twin.
void check_slots(const KvRows& kv, const std::vector<int64_t>& totals, int64_t head_dim,
                 std::mt19937& rng, const char* what) {
  const int S = static_cast<int>(totals.size());
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  const auto q = test::random_floats(S * head_dim, rng);
  std::vector<float> out(static_cast<size_t>(S * head_dim), -7.0f);
  std::vector<const float*> qs;
  std::vector<float*> outs;
  for (int s = 0; s < S; ++s) {
    qs.push_back(q.data() + s * head_dim);
    outs.push_back(out.data() + s * head_dim);
  }
  const int64_t longest = totals.empty() ? 0 : totals[0];
  std::vector<float> scratch(
      static_cast<size_t>(attention_slots_scratch_floats(longest, head_dim, S)));
  attention_slots(qs.data(), outs.data(), totals.data(), S, kv, head_dim, scale, scratch.data());
  std::vector<float> alone(head_dim), want(head_dim);
  for (int s = 0; s < S; ++s) {
    const KvRows cut = first_positions(kv, totals[s]);
    std::vector<float> work(static_cast<size_t>(attention_scratch_floats(totals[s], head_dim, 1)));
    float* a = alone.data();
    detail::active_attention_heads()(&qs[s], &a, 1, cut, head_dim, scale, work.data());
    ASSERT_TRUE(same_bits(outs[s], alone.data(), head_dim))
        << what << " " << isa_name(active_isa()) << " head_dim " << head_dim << " slot " << s
        << " of " << S << " total " << totals[s];
    ref::attention_head(qs[s], cut, head_dim, scale, want.data());
    for (int64_t d = 0; d < head_dim; ++d)
      ASSERT_NEAR(outs[s][d], want[d], 2e-4)
          << what << " " << isa_name(active_isa()) << " head_dim " << head_dim << " slot " << s;
  }
}

// Slots of every awkward total in one pass, the positions a prefix and a scattered list, and
// every non-increasing subset drawn at random (a slot's bits do not depend on its neighbours).
TEST(AttentionSlots, EachSlotEqualsTheKernelAlone) {
  std::mt19937 rng(21);
  test::IsaGuard guard;
  const std::vector<int64_t> all = {130, 33, 17, 16, 15, 5, 4, 3, 2, 1, 0};
  for (Isa isa : test::runnable_isas()) {
    force_isa(isa);
    for (int64_t head_dim : {64, 40, 72, 17}) {
      for (int64_t prefix : {0, 7, 16, 100}) {
        const int64_t kv_heads = 3, longest = 130;
        Rows rows(longest + 20, kv_heads * head_dim, rng);
        std::vector<int64_t> extra;
        for (int64_t p = prefix; p < longest + 20; ++p) extra.push_back(p);
        std::shuffle(extra.begin(), extra.end(), rng);
        extra.resize(static_cast<size_t>(longest - prefix));
        KvRows kv{rows.k.data(), rows.v.data(), prefix, extra.data(), longest - prefix,
                  head_dim};  // the middle KV head
        check_slots(kv, all, head_dim, rng, "all totals");
        for (int draw = 0; draw < 4; ++draw) {
          std::vector<int64_t> some;
          for (int64_t t : all)
            if (rng() % 2) some.push_back(t);
          if (rng() % 2) some.insert(some.begin(), some.empty() ? 9 : some[0]);  // a repeat
          if (!some.empty()) kv.n_extra = std::max<int64_t>(some[0] - prefix, 0);
          if (!some.empty()) kv.prefix = std::min(prefix, some[0]);
          check_slots(kv, some, head_dim, rng, "subset");
          kv.prefix = prefix;
          kv.n_extra = longest - prefix;
        }
      }
    }
  }
}

// A causal block as the CPU backend hands it over: rows 0..n-1 after a prefix P, row i seeing
// P + i + 1 positions, each row with the 3 query heads of one KV head; slots ordered longest row
// first. Each row's heads equal the single-query path (attention_heads with G = 3 on that row).
TEST(AttentionSlots, CausalBlockEqualsRowByRow) {
  std::mt19937 rng(22);
  test::IsaGuard guard;
  for (Isa isa : test::runnable_isas()) {
    force_isa(isa);
    for (int64_t head_dim : {64, 72}) {
      for (int64_t P : {0, 3, 31, 200}) {
        for (int64_t n : {1, 2, 5, 12, 17}) {
          const int G = 3, kv_heads = 3;
          Rows rows(P + n, kv_heads * head_dim, rng);
          std::vector<int64_t> block(static_cast<size_t>(n));
          std::iota(block.begin(), block.end(), P);
          const KvRows kv{rows.k.data(), rows.v.data(), P, block.data(), n, 2 * head_dim};
          const auto q = test::random_floats(n * G * head_dim, rng);
          std::vector<float> out(q.size()), want(q.size());
          std::vector<const float*> qs;
          std::vector<float*> outs;
          std::vector<int64_t> totals;
          for (int64_t i = n - 1; i >= 0; --i)
            for (int h = 0; h < G; ++h) {
              qs.push_back(q.data() + (i * G + h) * head_dim);
              outs.push_back(out.data() + (i * G + h) * head_dim);
              totals.push_back(P + i + 1);
            }
          const int S = static_cast<int>(totals.size());
          std::vector<float> scratch(
              static_cast<size_t>(attention_slots_scratch_floats(P + n, head_dim, S)));
          attention_slots(qs.data(), outs.data(), totals.data(), S, kv, head_dim, 0.125f,
                          scratch.data());
          std::vector<float> work(
              static_cast<size_t>(attention_scratch_floats(P + n, head_dim, G)));
          for (int64_t i = 0; i < n; ++i) {
            const float* rq[3];
            float* ro[3];
            for (int h = 0; h < G; ++h) {
              rq[h] = q.data() + (i * G + h) * head_dim;
              ro[h] = want.data() + (i * G + h) * head_dim;
            }
            KvRows row{rows.k.data(), rows.v.data(), P, block.data(), i + 1, 2 * head_dim};
            attention_heads(rq, ro, G, row, head_dim, 0.125f, work.data());
          }
          ASSERT_TRUE(same_bits(out.data(), want.data(), static_cast<int64_t>(out.size())))
              << isa_name(isa) << " head_dim " << head_dim << " P " << P << " n " << n;
        }
      }
    }
  }
}

TEST(AttentionSlots, RejectsTotalsThatDoNotNest) {
  std::mt19937 rng(23);
  Rows rows(8, 16, rng);
  const KvRows kv{rows.k.data(), rows.v.data(), 8, nullptr, 0, 0};
  const auto q = test::random_floats(2 * 16, rng);
  std::vector<float> out(2 * 16), scratch(attention_slots_scratch_floats(9, 16, 2));
  const float* qs[2] = {q.data(), q.data() + 16};
  float* outs[2] = {out.data(), out.data() + 16};
  const int64_t growing[2] = {3, 5}, too_long[2] = {9, 1};
  EXPECT_ANY_THROW(attention_slots(qs, outs, growing, 2, kv, 16, 1.0f, scratch.data()));
  EXPECT_ANY_THROW(attention_slots(qs, outs, too_long, 2, kv, 16, 1.0f, scratch.data()));
}

}  // namespace
}  // namespace ssd::kernels
