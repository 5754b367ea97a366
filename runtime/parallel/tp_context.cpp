// Start-up plan, start-up handshake and the logits gather of a TP rank (see tp_context.h).
#include "runtime/parallel/tp_context.h"

#include <algorithm>
#include <numeric>
#include <utility>
#include <string>

#include "runtime/core/error.h"

namespace ssd {
namespace {

// What each rank tells the others at start-up, as exact small integers in floats (Collective
// moves floats; every value is checked to be below 2^24, where floats hold integers exactly).
enum Field {
  kValid, kSize, kMode, kLayers, kDim, kHeads, kKvHeads, kHeadDim, kFfn, kVocab,
  kQ0, kQ1, kKv0, kKv1, kF0, kF1, kV0, kV1, kD0, kD1, kFields
};
const char* const kFieldNames[kFields] = {
    "valid", "T", "mode (0 exact, 1 megatron)", "layers", "dim", "query heads", "KV heads",
    "head_dim", "ffn_dim", "vocab", "first query head", "query head end", "first KV head",
    "KV head end", "ffn begin", "ffn end", "vocab begin", "vocab end", "dim begin", "dim end"};

// "" when the shard is internally consistent for this model and rank, else what is wrong.
std::string shard_problem(const TpContext& tp, const ModelConfig& cfg) {
  const TpShard& s = tp.shard;
  if (!tp.comm) return "the TP context has no Collective";
  if (s.size != tp.comm->size() || s.rank != tp.comm->rank())
    return fmt::format("shard is for rank {} of {} but the Collective is rank {} of {}", s.rank,
                       s.size, tp.comm->rank(), tp.comm->size());
  if (s.q_heads.empty() || s.kv_heads.empty()) return "shard holds no heads";
  for (size_t i = 0; i < s.q_heads.size(); ++i)
    if (s.q_heads[i] != s.q_heads[0] + static_cast<int32_t>(i) || s.q_heads[i] < 0 ||
        s.q_heads[i] >= cfg.n_heads)
      return "query heads are not one ascending run inside the model's heads";
  const int64_t group = cfg.n_heads / cfg.n_kv_heads;
  const int64_t kv0 = s.q_heads.front() / group, kv1 = s.q_heads.back() / group + 1;
  if (static_cast<int64_t>(s.kv_heads.size()) != kv1 - kv0)
    return fmt::format("holds {} KV heads, its query heads read {}", s.kv_heads.size(), kv1 - kv0);
  for (size_t i = 0; i < s.kv_heads.size(); ++i)
    if (s.kv_heads[i] != kv0 + static_cast<int64_t>(i))
      return "KV heads are not the ones its query heads read";
  if (s.kv_head_of.size() != s.q_heads.size()) return "kv_head_of is not one entry per query head";
  for (size_t i = 0; i < s.q_heads.size(); ++i)
    if (s.kv_head_of[i] != s.q_heads[i] / group - kv0)
      return fmt::format("kv_head_of[{}] = {} but query head {} reads KV head {}", i,
                         s.kv_head_of[i], s.q_heads[i], s.q_heads[i] / group);
  if (!(0 <= s.ffn_begin && s.ffn_begin < s.ffn_end && s.ffn_end <= cfg.ffn_dim))
    return fmt::format("ffn range [{}, {}) is empty or outside 0..{}", s.ffn_begin, s.ffn_end,
                       cfg.ffn_dim);
  if (!(0 <= s.vocab_begin && s.vocab_begin < s.vocab_end && s.vocab_end <= cfg.vocab))
    return fmt::format("vocab range [{}, {}) is empty or outside 0..{}", s.vocab_begin,
                       s.vocab_end, cfg.vocab);
  if (!(0 <= s.dim_begin && s.dim_begin < s.dim_end && s.dim_end <= cfg.dim))
    return fmt::format("output rows [{}, {}) are empty or outside 0..{}", s.dim_begin, s.dim_end,
                       cfg.dim);
  return "";
}

}  // namespace

int64_t tp_ffn_block(const ModelWeights& w) {
  int64_t block = 1;
  for (const LayerWeights& l : w.layers)
    if (l.w_down) block = std::lcm(block, int64_t{dtype_traits(l.w_down->type).block_elems});
  return block;
}

TpContext make_tp_context(const ModelFile& model, Collective& comm, TpMode mode) {
  return TpContext{&comm,
                   plan_tp_shard(model.config(), comm.rank(), comm.size(),
                                 tp_ffn_block(model.weights())),
                   mode};
}

TpLayout check_tp_group(const TpContext& tp, const ModelConfig& cfg, int64_t layers) {
  SSD_CHECK(tp.comm, "tensor parallelism: the TP context has no Collective");
  Collective& comm = *tp.comm;
  const int T = comm.size();
  std::string problem = shard_problem(tp, cfg);
  const TpShard& s = tp.shard;
  const bool have_heads = !s.q_heads.empty() && !s.kv_heads.empty();
  const int64_t mine[kFields] = {
      1, s.size, tp.mode == TpMode::Exact ? 0 : 1, layers, cfg.dim, cfg.n_heads,
      cfg.n_kv_heads, cfg.head_dim, cfg.ffn_dim,
      cfg.vocab, have_heads ? s.q_heads.front() : 0, have_heads ? s.q_heads.back() + 1 : 0,
      have_heads ? s.kv_heads.front() : 0, have_heads ? s.kv_heads.back() + 1 : 0, s.ffn_begin,
      s.ffn_end, s.vocab_begin, s.vocab_end, s.dim_begin, s.dim_end};
  std::vector<float> send(kFields);
  for (int f = 0; f < kFields; ++f) {
    if (mine[f] < 0 || mine[f] >= (int64_t{1} << 24))
      problem = fmt::format("{} = {} is out of the range the handshake carries", kFieldNames[f],
                            mine[f]);
    send[f] = static_cast<float>(mine[f]);
  }
  if (!problem.empty()) send[kValid] = 0;
  std::vector<int64_t> counts(T, kFields);
  std::vector<float> all(static_cast<size_t>(T) * kFields);
  comm.allgatherv(send.data(), counts.data(), all.data());
  auto at = [&](int r, int f) { return static_cast<int64_t>(all[r * kFields + f]); };

  // Every rank reaches the same verdict from the same numbers, so all ranks throw together, and
  // with the same message: a rank's own problem is sent to the others (as one char per float).
  for (int r = 0; r < T; ++r) {
    if (at(r, kValid) == 1) continue;
    constexpr int64_t kChars = 240;
    std::vector<float> text(kChars, 0.0f), texts(static_cast<size_t>(T) * kChars);
    for (size_t i = 0; i < problem.size() && i < kChars; ++i)
      text[i] = static_cast<unsigned char>(problem[i]);
    std::vector<int64_t> text_counts(T, kChars);
    comm.allgatherv(text.data(), text_counts.data(), texts.data());
    std::string why;
    for (int64_t i = 0; i < kChars && texts[r * kChars + i] != 0; ++i)
      why += static_cast<char>(texts[r * kChars + i]);
    fail(fmt::format("tensor parallelism, rank {}: {}", r, why));
  }
  for (int r = 1; r < T; ++r)
    for (int f = kSize; f <= kVocab; ++f)
      SSD_CHECK(at(r, f) == at(0, f),
                "tensor parallelism: rank {} has {} = {} but rank 0 has {} (the ranks must run "
                "the same model with the same T and mode)", r, kFieldNames[f], at(r, f), at(0, f));
  auto tiles = [&](int f0, int f1, int64_t total, const char* what) {
    int64_t next = 0;
    for (int r = 0; r < T; ++r) {
      SSD_CHECK(at(r, f0) == next && at(r, f1) > at(r, f0),
                "tensor parallelism: rank {} holds {} [{}, {}), expected to start at {} (the "
                "ranks' shards must cover the model once, in rank order)", r, what, at(r, f0),
                at(r, f1), next);
      next = at(r, f1);
    }
    SSD_CHECK(next == total, "tensor parallelism: the ranks hold {} [0, {}) of {}", what, next,
              total);
  };
  tiles(kQ0, kQ1, cfg.n_heads, "query heads");
  tiles(kF0, kF1, cfg.ffn_dim, "ffn columns");
  tiles(kV0, kV1, cfg.vocab, "vocab rows");
  tiles(kD0, kD1, cfg.dim, "output rows");
  TpLayout layout;
  for (auto [v, end] : {std::pair{&layout.heads, kQ1}, {&layout.ffn, kF1}, {&layout.vocab, kV1},
                        {&layout.dim, kD1}}) {
    v->assign(T + 1, 0);
    for (int r = 0; r < T; ++r) (*v)[r + 1] = at(r, end);
  }
  return layout;
}

}  // namespace ssd
