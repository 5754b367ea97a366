// The tensor-parallel plan (runtime/parallel/tp_plan.h) on the head layouts that matter: SmolLM2
// (9 query heads / 3 KV heads), Llama-3-8B (32 / 8), Qwen2-1.5B (12 / 2 is common; 14 / 2 here is
// awkward on purpose), at every T from 1 to n_heads. Pure arithmetic, so every property is
// checked exactly.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <string>

#include "runtime/core/error.h"
#include "runtime/parallel/tp_plan.h"

namespace ssd {
namespace {

ModelConfig heads_config(int64_t heads, int64_t kv, int64_t ffn, int64_t vocab) {
  ModelConfig c;
  c.n_layers = 2;
  c.dim = heads * 64;
  c.ffn_dim = ffn;
  c.n_heads = heads;
  c.n_kv_heads = kv;
  c.head_dim = 64;
  c.vocab = vocab;
  c.context_length = 128;
  c.rope_dim = 64;
  return c;
}

struct Layout {
  int64_t heads, kv, ffn, vocab, block;
};

class PlanEveryT : public testing::TestWithParam<Layout> {};

TEST_P(PlanEveryT, ShardsTileTheModel) {
  const Layout L = GetParam();
  const ModelConfig cfg = heads_config(L.heads, L.kv, L.ffn, L.vocab);
  const int64_t group = L.heads / L.kv;
  for (int T = 1; T <= L.heads; ++T) {
    SCOPED_TRACE(testing::Message() << "T = " << T);
    std::vector<int> owner(L.heads, -1);
    int64_t ffn_next = 0, vocab_next = 0;
    size_t min_heads = L.heads, max_heads = 0;
    for (int r = 0; r < T; ++r) {
      const TpShard s = plan_tp_shard(cfg, r, T, L.block);
      EXPECT_EQ(s.rank, r);
      EXPECT_EQ(s.size, T);
      ASSERT_FALSE(s.q_heads.empty());
      ASSERT_EQ(s.kv_head_of.size(), s.q_heads.size());
      min_heads = std::min(min_heads, s.q_heads.size());
      max_heads = std::max(max_heads, s.q_heads.size());
      for (size_t i = 0; i < s.q_heads.size(); ++i) {
        const int32_t h = s.q_heads[i];
        ASSERT_GE(h, 0);
        ASSERT_LT(h, L.heads);
        EXPECT_EQ(owner[h], -1) << "query head " << h << " on two ranks";
        owner[h] = r;
        if (i > 0) {
          EXPECT_EQ(h, s.q_heads[i - 1] + 1) << "heads not one ascending run";
        }
        // The local KV head this query head reads is the global KV head GQA assigns it.
        ASSERT_GE(s.kv_head_of[i], 0);
        ASSERT_LT(s.kv_head_of[i], static_cast<int32_t>(s.kv_heads.size()));
        EXPECT_EQ(s.kv_heads[s.kv_head_of[i]], h / group) << "query head " << h;
      }
      // Exactly the KV heads its query heads read: none missing (checked above), none extra.
      for (size_t g = 0; g < s.kv_heads.size(); ++g)
        EXPECT_NE(std::find(s.kv_head_of.begin(), s.kv_head_of.end(), static_cast<int32_t>(g)),
                  s.kv_head_of.end())
            << "KV head " << s.kv_heads[g] << " held but read by no local query head";
      EXPECT_EQ(s.ffn_begin, ffn_next);
      EXPECT_GT(s.ffn_end, s.ffn_begin);
      EXPECT_EQ(s.ffn_begin % L.block, 0);
      EXPECT_EQ(s.ffn_end % L.block, 0);
      ffn_next = s.ffn_end;
      EXPECT_EQ(s.vocab_begin, vocab_next);
      EXPECT_GT(s.vocab_end, s.vocab_begin);
      vocab_next = s.vocab_end;
    }
    for (int64_t h = 0; h < L.heads; ++h) EXPECT_GE(owner[h], 0) << "query head " << h << " unheld";
    EXPECT_LE(max_heads - min_heads, 1u) << "heads not split as evenly as possible";
    EXPECT_EQ(ffn_next, L.ffn);
    EXPECT_EQ(vocab_next, L.vocab);
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, PlanEveryT,
                         testing::Values(Layout{9, 3, 1536, 49152, 32},      // SmolLM2-135M
                                         Layout{32, 8, 14336, 128256, 256},  // Llama-3-8B K-quant
                                         Layout{14, 2, 4864, 151936, 32}));  // awkward GQA

TEST(TpPlan, SmolLM2AtFourRanksReplicatesStraddlingKvHeads) {
  const ModelConfig cfg = heads_config(9, 3, 1536, 49152);
  const std::vector<std::vector<int32_t>> q = {{0, 1, 2}, {3, 4}, {5, 6}, {7, 8}};
  const std::vector<std::vector<int32_t>> kv = {{0}, {1}, {1, 2}, {2}};
  const std::vector<std::vector<int32_t>> map = {{0, 0, 0}, {0, 0}, {0, 1}, {0, 0}};
  for (int r = 0; r < 4; ++r) {
    const TpShard s = plan_tp_shard(cfg, r, 4, 32);
    EXPECT_EQ(s.q_heads, q[r]) << "rank " << r;
    EXPECT_EQ(s.kv_heads, kv[r]) << "rank " << r;
    EXPECT_EQ(s.kv_head_of, map[r]) << "rank " << r;
  }
  // 1536 columns = 48 blocks of 32: 12 each.
  EXPECT_EQ(plan_tp_shard(cfg, 3, 4, 32).ffn_begin, 1152);
  // 49152 vocab rows / 4 = 12288 each.
  EXPECT_EQ(plan_tp_shard(cfg, 1, 4, 32).vocab_begin, 12288);
}

TEST(TpPlan, UnevenFfnBlocksGoToTheFirstRanks) {
  const ModelConfig cfg = heads_config(9, 3, 512, 261);  // 16 blocks of 32 over 3 ranks: 6,5,5
  EXPECT_EQ(plan_tp_shard(cfg, 0, 3, 32).ffn_end, 192);
  EXPECT_EQ(plan_tp_shard(cfg, 1, 3, 32).ffn_end, 352);
  EXPECT_EQ(plan_tp_shard(cfg, 2, 3, 32).ffn_begin, 352);
  // 261 vocab rows over 3: 87 each; over 4: 66, 65, 65, 65.
  EXPECT_EQ(plan_tp_shard(cfg, 1, 4, 32).vocab_begin, 66);
  EXPECT_EQ(plan_tp_shard(cfg, 3, 4, 32).vocab_end, 261);
}

void expect_error(const std::function<void()>& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one containing \"" << needle << "\"";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(TpPlan, ImpossibleDegreesAreRefusedByName) {
  const ModelConfig cfg = heads_config(9, 3, 1536, 49152);
  expect_error([&] { plan_tp_shard(cfg, 0, 0, 32); }, "degree T = 0 must be at least 1");
  expect_error([&] { plan_tp_shard(cfg, 0, -2, 32); }, "degree T = -2");
  expect_error([&] { plan_tp_shard(cfg, 0, 10, 32); }, "T = 10 exceeds the model's 9 query heads");
  expect_error([&] { plan_tp_shard(cfg, 4, 4, 32); }, "rank 4 is outside the group 0..3");
  // ffn 64 = 2 blocks of 32: three ranks cannot each hold a block.
  const ModelConfig small_ffn = heads_config(9, 3, 64, 49152);
  expect_error([&] { plan_tp_shard(small_ffn, 0, 3, 32); },
               "ffn dimension 64 has 2 blocks of 32 columns, fewer than the 3 ranks");
  expect_error([&] { plan_tp_shard(cfg, 0, 2, 100); }, "not a whole number of 100-column blocks");
  expect_error([&] { plan_tp_shard(cfg, 0, 2, 0); }, "block size 0 must be positive");
}

}  // namespace
}  // namespace ssd
