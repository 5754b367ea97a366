// Megatron-style split of one model over T ranks: pure arithmetic on the config (see tp_plan.h).
// Every range is "as even as possible, the first ranks take the remainder", so the plan of any
// rank can be recomputed by any other from (cfg, size, ffn_block) alone.
#include "runtime/parallel/tp_plan.h"

#include <algorithm>
#include <tuple>
#include <utility>

#include "runtime/core/error.h"

namespace ssd {
namespace {

// [begin, end) of part `rank` when `total` items are split over `size` parts.
std::pair<int64_t, int64_t> even_range(int64_t total, int rank, int size) {
  const int64_t base = total / size, extra = total % size;
  const int64_t begin = rank * base + std::min<int64_t>(rank, extra);
  return {begin, begin + base + (rank < extra ? 1 : 0)};
}

}  // namespace

TpShard plan_tp_shard(const ModelConfig& cfg, int rank, int size, int64_t ffn_block) {
  SSD_CHECK(size >= 1, "tensor parallelism: degree T = {} must be at least 1", size);
  SSD_CHECK(size <= cfg.n_heads,
            "tensor parallelism: degree T = {} exceeds the model's {} query heads (every rank "
            "needs at least one head)", size, cfg.n_heads);
  SSD_CHECK(rank >= 0 && rank < size, "tensor parallelism: rank {} is outside the group 0..{}",
            rank, size - 1);
  SSD_CHECK(cfg.n_kv_heads >= 1 && cfg.n_heads % cfg.n_kv_heads == 0,
            "tensor parallelism: {} query heads are not a multiple of {} KV heads", cfg.n_heads,
            cfg.n_kv_heads);
  SSD_CHECK(ffn_block >= 1, "tensor parallelism: ffn block size {} must be positive", ffn_block);
  SSD_CHECK(cfg.ffn_dim % ffn_block == 0,
            "tensor parallelism: ffn dimension {} is not a whole number of {}-column blocks",
            cfg.ffn_dim, ffn_block);
  const int64_t ffn_blocks = cfg.ffn_dim / ffn_block;
  SSD_CHECK(ffn_blocks >= size,
            "tensor parallelism: ffn dimension {} has {} blocks of {} columns, fewer than the {} "
            "ranks (each rank needs at least one block)", cfg.ffn_dim, ffn_blocks, ffn_block, size);
  SSD_CHECK(cfg.vocab >= size && cfg.dim >= size,
            "tensor parallelism: vocabulary of {} rows or dimension {} is smaller than T = {}",
            cfg.vocab, cfg.dim, size);

  TpShard s;
  s.rank = rank;
  s.size = size;
  const auto [q0, q1] = even_range(cfg.n_heads, rank, size);
  const int64_t group = cfg.n_heads / cfg.n_kv_heads;  // query heads per KV head
  const int64_t kv0 = q0 / group, kv1 = (q1 - 1) / group + 1;
  for (int64_t h = q0; h < q1; ++h) {
    s.q_heads.push_back(static_cast<int32_t>(h));
    s.kv_head_of.push_back(static_cast<int32_t>(h / group - kv0));
  }
  for (int64_t g = kv0; g < kv1; ++g) s.kv_heads.push_back(static_cast<int32_t>(g));
  const auto [f0, f1] = even_range(ffn_blocks, rank, size);
  s.ffn_begin = f0 * ffn_block;
  s.ffn_end = f1 * ffn_block;
  std::tie(s.vocab_begin, s.vocab_end) = even_range(cfg.vocab, rank, size);
  std::tie(s.dim_begin, s.dim_end) = even_range(cfg.dim, rank, size);
  return s;
}

const char* tp_mode_name(TpMode m) {
  switch (m) {
    case TpMode::Exact: return "exact";
    case TpMode::Megatron: return "megatron";
  }
  return "?";
}

}  // namespace ssd
