// The CPU backend's attention op over a real paged KV cache (4-token pages, so every sequence
// spans several pages; a forked sequence shares some pages and owns copied ones): 9 query heads
// over 3 KV heads, head_dim 64 and 48, a causal block after a prefix and a tree-masked branch of
// another sequence in one batch, with the usual grouping and with an explicit kv_head_of map.
// Checked against the float64 twin fed with rows read through KvCache::key/value (independent
// of the backend's page walk), within 2e-4 absolute (derivation in attention_test.cpp), and bit
// for bit: each query run alone (at 2 and 3 threads) equals the batched result, and 1 thread
// equals 3 threads.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/cpu/attention.h"
#include "runtime/backend/backend.h"
#include "runtime/core/error.h"

namespace ssd {
namespace {

constexpr int64_t kHeads = 9, kKvHeads = 3, kLayer = 1;

struct Fixture {
  int64_t head_dim;
  KvCache cache;
  SeqId a, b;
  std::vector<float> q;  // [n, heads, head_dim]
  // Batch: rows 0..3 a causal block of `a` at 26..29 (prefix 26); rows 4, 5 a tree branch of `b`.
  std::vector<SeqId> seqs{0, 0, 0, 0, 0, 0};
  std::vector<int64_t> prefix{26, 26, 26, 26, 20, 20};
  std::vector<int64_t> visible, offsets{0};

  static KvCacheConfig config(int64_t head_dim) {
    KvCacheConfig c;
    c.n_layers = 2;
    c.n_kv_heads = kKvHeads;
    c.head_dim = head_dim;
    c.page_tokens = 4;
    c.max_tokens = 256;
    return c;
  }

  Fixture(int64_t hd, Backend& be, std::mt19937& rng) : head_dim(hd), cache(config(hd)) {
    const int64_t row = kKvHeads * head_dim;
    auto write = [&](SeqId s, int64_t from, int64_t to) {
      for (int64_t p = from; p < to; ++p) {
        const auto k = kernels::test::random_floats(row, rng);
        const auto v = kernels::test::random_floats(row, rng);
        const int64_t pos = p;
        be.store_kv(cache, kLayer, &s, &pos, k.data(), v.data(), 1);
      }
    };
    a = cache.create();
    cache.grow(a, 22);
    write(a, 0, 22);
    b = cache.fork(a);  // shares a's 22 positions (pages 0..5, the last one partly)
    cache.truncate(b, 20);
    cache.grow(b, 8);
    write(b, 20, 28);  // copy on write of b's page 5
    cache.grow(a, 8);
    write(a, 22, 30);
    for (int i = 0; i < 4; ++i) {
      seqs[i] = a;
      for (int64_t p = 26; p <= 26 + i; ++p) visible.push_back(p);
      offsets.push_back(static_cast<int64_t>(visible.size()));
    }
    seqs[4] = seqs[5] = b;
    for (int64_t p : {20, 22, 23}) visible.push_back(p);  // a branch skipping 21
    offsets.push_back(static_cast<int64_t>(visible.size()));
    for (int64_t p : {20, 21, 24, 27}) visible.push_back(p);
    offsets.push_back(static_cast<int64_t>(visible.size()));
    q = kernels::test::random_floats(6 * kHeads * head_dim, rng);
  }

  AttentionCall call(std::vector<float>& out, const int32_t* map) const {
    AttentionCall c;
    c.q = q.data();
    c.out = out.data();
    c.n = 6;
    c.n_heads = kHeads;
    c.n_kv_heads = kKvHeads;
    c.head_dim = head_dim;
    c.kv_head_of = map;
    c.layer = kLayer;
    c.scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
    c.cache = &cache;
    c.seqs = seqs.data();
    c.prefix_len = prefix.data();
    c.visible = visible.data();
    c.visible_offsets = offsets.data();
    return c;
  }

  // Float64 reference of row i, head h reading KV head g, through KvCache::key / value.
  std::vector<float> reference(int64_t i, int64_t h, int64_t g, float scale) const {
    const int64_t n_pos = cache.length(seqs[i]);
    std::vector<const float*> k(n_pos), v(n_pos);
    for (int64_t p = 0; p < n_pos; ++p) {
      k[p] = cache.key(kLayer, seqs[i], p);
      v[p] = cache.value(kLayer, seqs[i], p);
    }
    kernels::KvRows kv{k.data(), v.data(), prefix[i], visible.data() + offsets[i],
                       offsets[i + 1] - offsets[i], g * head_dim};
    std::vector<float> out(head_dim);
    kernels::ref::attention_head(q.data() + (i * kHeads + h) * head_dim, kv, head_dim, scale,
                                 out.data());
    return out;
  }
};

void check_against_reference(const Fixture& f, const std::vector<float>& out, const int32_t* map) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(f.head_dim));
  for (int64_t i = 0; i < 6; ++i)
    for (int64_t h = 0; h < kHeads; ++h) {
      const int64_t g = map ? map[h] : h / (kHeads / kKvHeads);
      const auto want = f.reference(i, h, g, scale);
      for (int64_t d = 0; d < f.head_dim; ++d)
        ASSERT_NEAR(out[(i * kHeads + h) * f.head_dim + d], want[d], 2e-4)
            << "head_dim " << f.head_dim << " row " << i << " head " << h << " d " << d;
    }
}

TEST(CpuBackendAttention, BatchOfBlockAndTreeMatchesReferenceAndSingleQueries) {
  std::mt19937 rng(21);
  const int32_t map[kHeads] = {2, 2, 0, 1, 0, 1, 2, 0, 1};
  for (int64_t head_dim : {64, 48}) {
    auto be3 = make_cpu_backend(3);
    auto be2 = make_cpu_backend(2);
    auto be1 = make_cpu_backend(1);
    Fixture f(head_dim, *be3, rng);
    for (const int32_t* m : {static_cast<const int32_t*>(nullptr), map}) {
      std::vector<float> out3(6 * kHeads * head_dim), out1(out3.size());
      be3->attention(f.call(out3, m));
      be1->attention(f.call(out1, m));
      check_against_reference(f, out3, m);
      for (size_t j = 0; j < out3.size(); ++j)
        ASSERT_TRUE(kernels::test::same_float(out3[j], out1[j])) << "threads 3 vs 1 at " << j;
      // Each row alone: the same bits as in the batch. (Alone, a row has fewer tasks than 2 or
      // 3 threads want, so its heads are split over them.)
      for (Backend* be : {be3.get(), be2.get()})
      for (int64_t i = 0; i < 6; ++i) {
        AttentionCall c = f.call(out1, m);
        std::vector<float> one(kHeads * head_dim);
        const int64_t offs[2] = {0, f.offsets[i + 1] - f.offsets[i]};
        c.q = f.q.data() + i * kHeads * head_dim;
        c.out = one.data();
        c.n = 1;
        c.seqs = f.seqs.data() + i;
        c.prefix_len = f.prefix.data() + i;
        c.visible = f.visible.data() + f.offsets[i];
        c.visible_offsets = offs;
        be->attention(c);
        for (int64_t j = 0; j < kHeads * head_dim; ++j)
          ASSERT_TRUE(kernels::test::same_float(one[j], out3[i * kHeads * head_dim + j]))
              << "row " << i << " alone differs at " << j
              << (be == be2.get() ? " at 2 threads" : " at 3 threads");
      }
    }
  }
}

// Rows whose visible positions nest run in one pass over K/V (kernels::attention_slots), split
// over the threads: a 17-row causal block after 40 cached positions, a 3-row block of a second
// sequence, 4 rows seeing the same positions (a bidirectional Domino block), and rows that break
// the nesting (a row of the block seeing one position less than its predecessor, a skipped
// position). Every row equals the same row run alone (the single-query path a decode takes),
// bit for bit, at 1, 2 and 3 threads, and the float64 twin within 2e-4.
TEST(CpuBackendAttention, NestedRowsInOnePassEqualRowsAlone) {
  std::mt19937 rng(23);
  const int64_t head_dim = 64, row = kKvHeads * head_dim;
  auto be1 = make_cpu_backend(1);
  KvCache cache(Fixture::config(head_dim));
  const SeqId a = cache.create(), b = cache.create();
  cache.grow(a, 61);
  cache.grow(b, 12);
  for (SeqId s : {a, b})
    for (int64_t p = 0; p < cache.length(s); ++p) {
      const auto k = kernels::test::random_floats(row, rng);
      const auto v = kernels::test::random_floats(row, rng);
      be1->store_kv(cache, kLayer, &s, &p, k.data(), v.data(), 1);
    }
  std::vector<SeqId> seqs;
  std::vector<int64_t> prefix, visible, offsets{0};
  auto add_row = [&](SeqId s, int64_t pre, std::vector<int64_t> extra) {
    seqs.push_back(s);
    prefix.push_back(pre);
    visible.insert(visible.end(), extra.begin(), extra.end());
    offsets.push_back(static_cast<int64_t>(visible.size()));
  };
  std::vector<int64_t> block;
  for (int64_t i = 0; i < 17; ++i) {  // a: causal block at 40..56
    block.push_back(40 + i);
    add_row(a, 40, block);
    if (i == 9) add_row(a, 40, {40, 41, 42});          // breaks the chain: fewer positions
    if (i == 12) add_row(a, 40, {40, 41, 43, 44, 45});  // breaks it: skips 42
  }
  for (int64_t i = 0; i < 3; ++i) add_row(b, 9, {9, 10, 11}); // b: rows seeing the same positions
  block.clear();
  for (int64_t i = 0; i < 4; ++i) {  // a again: a short block at 57..60
    block.push_back(57 + i);
    add_row(a, 57, block);
  }
  const int64_t n = static_cast<int64_t>(seqs.size());
  const auto q = kernels::test::random_floats(n * kHeads * head_dim, rng);
  auto call = [&](float* out, int64_t first, int64_t rows, const int64_t* offs) {
    AttentionCall c;
    c.q = q.data() + first * kHeads * head_dim;
    c.out = out;
    c.n = rows;
    c.n_heads = kHeads;
    c.n_kv_heads = kKvHeads;
    c.head_dim = head_dim;
    c.layer = kLayer;
    c.scale = 0.125f;
    c.cache = &cache;
    c.seqs = seqs.data() + first;
    c.prefix_len = prefix.data() + first;
    c.visible = visible.data() + offsets[first];
    c.visible_offsets = offs;
    return c;
  };
  std::vector<float> alone(q.size());
  for (int64_t i = 0; i < n; ++i) {
    const int64_t offs[2] = {0, offsets[i + 1] - offsets[i]};
    be1->attention(call(alone.data() + i * kHeads * head_dim, i, 1, offs));
  }
  // The whole batch (many chains, long ones cut into contiguous chunks), and its first 10 rows
  // alone (one chain, cut into interleaved subsets to give 2 and 3 threads two tasks each).
  for (int64_t rows : {n, int64_t{10}})
    for (int threads : {1, 2, 3}) {
      auto be = make_cpu_backend(threads);
      std::vector<float> out(static_cast<size_t>(rows * kHeads * head_dim), -7.0f);
      be->attention(call(out.data(), 0, rows, offsets.data()));
      for (size_t j = 0; j < out.size(); ++j)
        ASSERT_TRUE(kernels::test::same_float(out[j], alone[j]))
            << rows << " rows, threads " << threads << ": row " << j / (kHeads * head_dim)
            << " differs from alone";
    }
  for (int64_t i = 0; i < n; ++i) {
    const int64_t len = cache.length(seqs[i]);
    std::vector<const float*> k(len), v(len);
    for (int64_t p = 0; p < len; ++p) {
      k[p] = cache.key(kLayer, seqs[i], p);
      v[p] = cache.value(kLayer, seqs[i], p);
    }
    for (int64_t h = 0; h < kHeads; ++h) {
      kernels::KvRows kv{k.data(), v.data(), prefix[i], visible.data() + offsets[i],
                         offsets[i + 1] - offsets[i], h / (kHeads / kKvHeads) * head_dim};
      std::vector<float> want(head_dim);
      const int64_t at = (i * kHeads + h) * head_dim;
      kernels::ref::attention_head(q.data() + at, kv, head_dim, 0.125f, want.data());
      for (int64_t d = 0; d < head_dim; ++d)
        ASSERT_NEAR(alone[at + d], want[d], 2e-4) << "row " << i << " head " << h;
    }
  }
}

TEST(CpuBackendAttention, RejectsBadHeadMapsAndPositions) {
  std::mt19937 rng(22);
  auto be = make_cpu_backend(2);
  Fixture f(48, *be, rng);
  std::vector<float> out(6 * kHeads * 48);
  const int32_t bad_map[kHeads] = {0, 1, 2, 3, 0, 1, 2, 0, 1};
  EXPECT_THROW(be->attention(f.call(out, bad_map)), Error);
  AttentionCall c = f.call(out, nullptr);
  c.n_heads = 8;  // 8 query heads do not group over 3 KV heads without a map
  EXPECT_THROW(be->attention(c), Error);
  f.visible[0] = 30;  // sequence a has positions 0..29
  EXPECT_THROW(be->attention(f.call(out, nullptr)), Error);
}

}  // namespace
}  // namespace ssd
