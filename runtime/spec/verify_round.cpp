#include "runtime/spec/verify_round.h"

#include "runtime/core/error.h"
#include "runtime/generate/token_picker.h"
#include "runtime/generate/generation.h"

namespace ssd {
namespace {

const DraftTree& tree_of(const VerifyInput& in) {
  static const DraftTree kEmpty;
  return in.tree ? *in.tree : kEmpty;
}

// Verifies sequence i of the round, compacts its KV to root + accepted path, and gathers its
// features.
void decide(TargetModel& target, const VerifyInput& in, const std::vector<int32_t>& layers,
            size_t i, VerifyRoundResult& round) {
  const DraftTree& t = tree_of(in);
  VerifyOutput& o = round.seqs[i];
  double t0 = monotonic_seconds();
  o.result = target.picker().verify(t, round.forward, static_cast<size_t>(o.first_row),
                                    in.sampler, VerifyRng{in.sampler.seed, in.stream, in.step});
  round.verify_s += monotonic_seconds() - t0;

  // Keep root + accepted path; drop the rejected branches. When the path is the whole tree (a
  // chain accepted in full), there is nothing to drop.
  t0 = monotonic_seconds();
  std::vector<int32_t> keep{0};
  for (int32_t node : o.result.path) keep.push_back(1 + node);
  if (static_cast<int32_t>(keep.size()) < o.rows) target.compact(in.kv_seq, in.root_pos, keep);
  round.kv_s += monotonic_seconds() - t0;

  if (!layers.empty()) {
    std::vector<int32_t> rows(keep.size());
    for (size_t r = 0; r < keep.size(); ++r) rows[r] = o.first_row + keep[r];
    o.features = gather_features(round.forward, rows);
  }
}

}  // namespace

Batch verify_batch(std::span<const VerifyInput> seqs, const std::vector<int32_t>& feature_layers) {
  size_t n = 0;
  for (const VerifyInput& in : seqs) n += 1 + tree_of(in).size();
  Batch b;
  b.tokens.reserve(n);
  b.positions.reserve(n);
  b.seqs.reserve(n);
  b.logits_rows.reserve(n);
  b.mask.assign(n * n, 0);  // [n, n], block-diagonal: one block per sequence
  size_t base = 0;
  for (const VerifyInput& in : seqs) {
    const DraftTree& t = tree_of(in);
    b.tokens.push_back(in.root);
    b.positions.push_back(in.root_pos);
    for (size_t i = 0; i < t.size(); ++i) {
      b.tokens.push_back(t.tokens[i]);
      b.positions.push_back(in.root_pos + t.depth(static_cast<int32_t>(i)));
    }
    const size_t m = 1 + t.size();
    for (size_t r = 0; r < m; ++r) {
      b.seqs.push_back(in.kv_seq);
      b.logits_rows.push_back(static_cast<int32_t>(base + r));
      uint8_t* row = b.mask.data() + (base + r) * n + base;  // the sequence's own block
      row[0] = 1;                                            // the root
      for (int32_t node = static_cast<int32_t>(r) - 1; node >= 0; node = t.parents[node])
        row[1 + node] = 1;  // itself and its ancestors
    }
    base += m;
  }
  b.hidden_layers = feature_layers;
  return b;
}

VerifyRoundResult verify_round(TargetModel& target, std::span<const VerifyInput> seqs,
                               const std::vector<int32_t>& feature_layers, bool host_logits) {
  SSD_CHECK(!seqs.empty(), "verification round: no sequences");
  const int32_t vocab = static_cast<int32_t>(target.config().vocab);
  for (size_t i = 0; i < seqs.size(); ++i) {
    const VerifyInput& in = seqs[i];
    tree_of(in).validate(vocab);
    SSD_CHECK(in.root >= 0 && in.root < vocab,
              "verification round: root token {} of sequence {} is outside the vocabulary (0..{})",
              in.root, in.kv_seq, vocab - 1);
    const int64_t cached = target.seq_length(in.kv_seq);
    SSD_CHECK(cached == in.root_pos,
              "verification round: sequence {} holds {} positions but its root is at position {} "
              "(the root must be the one emitted token not yet in the cache)",
              in.kv_seq, cached, in.root_pos);
    for (size_t j = 0; j < i; ++j)
      SSD_CHECK(seqs[j].kv_seq != in.kv_seq, "verification round: sequence {} appears twice",
                in.kv_seq);
  }

  VerifyRoundResult out;
  Batch batch = verify_batch(seqs, feature_layers);
  batch.logits_in_backend = target.picker().reads_backend_logits();
  out.rows = static_cast<int64_t>(batch.size());
  const double t0 = monotonic_seconds();
  out.forward = target.forward(batch);
  out.forward_s = monotonic_seconds() - t0;

  out.seqs.resize(seqs.size());
  int32_t base = 0;
  for (size_t i = 0; i < seqs.size(); ++i) {
    out.seqs[i].first_row = base;
    out.seqs[i].rows = 1 + static_cast<int32_t>(tree_of(seqs[i]).size());
    base += out.seqs[i].rows;
  }
  try {
    for (size_t i = 0; i < seqs.size(); ++i) decide(target, seqs[i], feature_layers, i, out);
  } catch (...) {
    // A verification error (e.g. a draft's q that does not sum to 1) undoes the round on every
    // sequence, so the caches are as before the call.
    for (const VerifyInput& in : seqs)
      if (target.seq_length(in.kv_seq) > in.root_pos) target.truncate(in.kv_seq, in.root_pos);
    throw;
  }
  if (host_logits) out.forward.download_logits();
  return out;
}

}  // namespace ssd
