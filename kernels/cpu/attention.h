// Attention of one query head over the cached keys and values it may see, on the CPU.
//
// The caller (the CPU backend) walks the KV cache's page table once per sequence and layer and
// hands each query a KvRows: per-position row pointers plus which positions the query sees (a
// prefix [0, prefix) then an explicit list, for causal blocks, draft trees and Domino blocks).
// Every query head of a batch then reads those pointers; nothing here knows about pages.
//
// Exactness: the result for a query depends only on its q and on the sequence of K/V values it
// sees, never on how that sequence is split between prefix and list, nor on the other queries of
// the batch or on the thread that runs it. A verification forward over K+1 tokens therefore
// produces bit for bit what K+1 one-token decodes produce, which greedy speculative decoding
// needs.
//
// Kernels: AVX-512 and AVX2 (SIMD dot products for q.k, vector exp for the softmax, SIMD
// weighted sum of V), a plain float version for CPUs with neither, and a float64 reference twin.
// attention_heads runs the query heads of one row; attention_slots runs the rows of a causal
// block in one pass over the K/V rows they share, each row's bits those of attention_heads.
#pragma once

#include <cstdint>

namespace ssd::kernels {

// The positions one query sees, in order: [0, prefix) then extra[0 .. n_extra). k[p] / v[p] is
// the K / V row of cache position p ([n_kv_heads, head_dim] floats); the kernel reads
// head_dim floats at k[p] + offset.
struct KvRows {
  const float* const* k = nullptr;  // [positions of the sequence]
  const float* const* v = nullptr;  // [positions of the sequence]
  int64_t prefix = 0;
  const int64_t* extra = nullptr;   // [n_extra] cache positions
  int64_t n_extra = 0;
  int64_t offset = 0;               // floats into each row: kv_head * head_dim
  int64_t total() const { return prefix + n_extra; }
};

// Scratch floats attention_heads needs for G heads over `total` positions.
int64_t attention_scratch_floats(int64_t total, int64_t head_dim, int G);

// out[h][head_dim] = softmax(scale * q[h] . K^T) V over the positions of kv, for the G query
// heads (1 <= G <= 64) that read the KV head at kv.offset (grouped-query attention: one pass over
// the K/V rows serves all of them). Each head's result is bit for bit the same whatever G is.
// With no position visible, out is all zeros.
void attention_heads(const float* const* q, float* const* out, int G, const KvRows& kv,
                     int64_t head_dim, float scale, float* scratch);

// Scratch floats attention_slots needs for S slots, the longest seeing `total` positions.
int64_t attention_slots_scratch_floats(int64_t total, int64_t head_dim, int S);

// The rows of a causal block in one pass over the K/V rows: S query slots (a slot is one query
// head of one query row, all reading the KV head at kv.offset), slot s seeing the first
// totals[s] positions of kv (totals non-increasing, totals[0] <= kv.total(), S <= 1024).
// out[s][head_dim] is bit for bit what attention_heads gives slot s's head alone over a KvRows
// cut to its first totals[s] positions, whatever the other slots are; with no position
// visible, all zeros. Row i of a verification or prefill block sees the prefix and the block's
// rows 0..i, so its positions are the first prefix + i + 1 of the last row's.
void attention_slots(const float* const* q, float* const* out, const int64_t* totals, int S,
                     const KvRows& kv, int64_t head_dim, float scale, float* scratch);

// kv cut to its first `total` positions (total <= kv.total()).
KvRows first_positions(const KvRows& kv, int64_t total);

// One head (G = 1), with its own scratch: for tests and callers off the hot path.
void attention_head(const float* q, const KvRows& kv, int64_t head_dim, float scale, float* out);

// Float64 twin (exact softmax, float64 sums), for tests.
namespace ref {
void attention_head(const float* q, const KvRows& kv, int64_t head_dim, float scale, float* out);
}  // namespace ref

namespace detail {
using AttentionHeadsFn = void (*)(const float* const* q, float* const* out, int G,
                                  const KvRows& kv, int64_t head_dim, float scale,
                                  float* scratch);
void attention_heads_scalar(const float* const* q, float* const* out, int G, const KvRows& kv,
                            int64_t head_dim, float scale, float* scratch);
void attention_heads_avx2(const float* const* q, float* const* out, int G, const KvRows& kv,
                          int64_t head_dim, float scale, float* scratch);
void attention_heads_avx512(const float* const* q, float* const* out, int G, const KvRows& kv,
                            int64_t head_dim, float scale, float* scratch);
using AttentionSlotsFn = void (*)(const float* const* q, float* const* out,
                                  const int64_t* totals, int S, const KvRows& kv,
                                  int64_t head_dim, float scale, float* scratch);
void attention_slots_scalar(const float* const* q, float* const* out, const int64_t* totals,
                            int S, const KvRows& kv, int64_t head_dim, float scale,
                            float* scratch);
void attention_slots_avx2(const float* const* q, float* const* out, const int64_t* totals,
                          int S, const KvRows& kv, int64_t head_dim, float scale,
                          float* scratch);
void attention_slots_avx512(const float* const* q, float* const* out, const int64_t* totals,
                            int S, const KvRows& kv, int64_t head_dim, float scale,
                            float* scratch);
// The kernels of the active ISA (kernels/cpu/rowops.h active_isa()).
AttentionHeadsFn active_attention_heads();
AttentionSlotsFn active_attention_slots();
}  // namespace detail

}  // namespace ssd::kernels
