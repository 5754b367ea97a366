#include "actors/roles/drafter_wire.h"

#include "runtime/core/error.h"

namespace ssd {
namespace {

// Splits the bulk into per-sequence row blocks of `dim` floats; rows[i] rows for sequence i. The
// counts come from a peer: each must be >= 0 (only their sum is seen in the bulk's size, so
// {2, -1} with one row would send sequence 0 reading past the buffer), their sum times dim must
// be the bulk's size without overflowing, and rows must be as wide as the drafter reads them.
std::vector<const float*> row_blocks(std::span<const float> bulk, const std::vector<int64_t>& rows,
                                     int64_t dim, int64_t drafter_dim) {
  int64_t total = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    SSD_CHECK(rows[i] >= 0, "drafter link: sequence {} of the message has {} feature rows", i,
              rows[i]);
    SSD_CHECK(!__builtin_add_overflow(total, rows[i], &total),
              "drafter link: the feature row counts overflow");
  }
  SSD_CHECK(total == 0 || dim == drafter_dim,
            "drafter link: feature rows of {} floats announced; the drafter reads rows of {}",
            dim, drafter_dim);
  int64_t floats = 0;
  SSD_CHECK(dim >= 0 && !__builtin_mul_overflow(total, dim, &floats) &&
                floats == static_cast<int64_t>(bulk.size()),
            "drafter link: {} feature rows of {} floats announced, {} floats received", total, dim,
            bulk.size());
  std::vector<const float*> out;
  int64_t at = 0;
  for (int64_t r : rows) {
    out.push_back(r > 0 ? bulk.data() + at * dim : nullptr);
    at += r;
  }
  return out;
}

std::vector<RoundOutcome> to_round_outcomes(const std::vector<SeqOutcome>& seqs, int64_t dim,
                                            std::span<const float> features,
                                            int64_t drafter_dim) {
  std::vector<int64_t> rows;
  for (const auto& s : seqs) rows.push_back(s.feature_rows);
  const std::vector<const float*> blocks = row_blocks(features, rows, dim, drafter_dim);
  std::vector<RoundOutcome> out;
  for (size_t i = 0; i < seqs.size(); ++i) {
    RoundOutcome o;
    o.seq = seqs[i].seq;
    o.accepted = seqs[i].accepted;
    o.emitted = seqs[i].emitted;
    o.next_k = seqs[i].next_k;
    o.features = blocks[i];
    o.features_from = seqs[i].feature_from;
    o.feature_rows = seqs[i].feature_rows;
    o.feature_dim = dim;
    if (seqs[i].leader_drafted) {  // checked on decoding (protocol.cpp) and by the core
      const SeqSpeculation& d = seqs[i].drafted;
      Speculation g;
      g.seq = d.seq;
      g.source = static_cast<SpecSource>(d.source);
      g.tokens = d.tokens;
      g.q = d.q;
      o.given = std::move(g);
    }
    out.push_back(std::move(o));
  }
  return out;
}

}  // namespace

void start_sequences(SsdDrafterCore& core, const StartSeqs& m, std::span<const float> features) {
  SSD_CHECK(m.prompts.size() == m.seqs.size() && m.emitted.size() == m.seqs.size() &&
                m.streams.size() == m.seqs.size() && m.feature_rows.size() == m.seqs.size(),
            "StartSeqs: {} sequences but {} prompts / {} emitted / {} streams / {} feature rows",
            m.seqs.size(), m.prompts.size(), m.emitted.size(), m.streams.size(),
            m.feature_rows.size());
  const std::vector<const float*> blocks =
      row_blocks(features, m.feature_rows, m.feature_dim, core.feature_dim());
  for (size_t i = 0; i < m.seqs.size(); ++i) {
    core.start(m.seqs[i], m.prompts[i], m.emitted[i], m.streams[i]);
    if (m.feature_rows[i] > 0)
      core.set_features(m.seqs[i], 0,
                        std::span<const float>(blocks[i], m.feature_rows[i] * m.feature_dim));
  }
}

std::vector<RoundOutcome> round_outcomes(const Outcome& m, std::span<const float> features,
                                         int64_t drafter_dim) {
  return to_round_outcomes(m.seqs, m.feature_dim, features, drafter_dim);
}

std::vector<RoundOutcome> work_outcomes(const PrespecWork& w, std::span<const float> features,
                                        int64_t drafter_dim) {
  return to_round_outcomes(w.outcomes, w.feature_dim, features, drafter_dim);
}

SpeculationMsg speculation_message(int64_t round, const std::vector<Speculation>& next) {
  SpeculationMsg m;
  m.round = round;
  for (const Speculation& s : next) {
    if (s.decode_step()) continue;  // the leader asked for nothing (protocol.h, SpeculationMsg)
    SeqSpeculation w;
    w.seq = s.seq;
    w.source = static_cast<uint8_t>(s.source);
    w.tokens = s.tokens;
    w.q = s.q;
    m.seqs.push_back(std::move(w));
  }
  return m;
}

PrespecPush prespec_push(int64_t round, const std::vector<CacheEntry>& entries) {
  PrespecPush m;
  m.round = round;
  m.entries.reserve(entries.size());
  for (const CacheEntry& e : entries)
    m.entries.push_back(PushedSpec{e.seq, e.k, e.bonus, e.spec.tokens, e.spec.q});
  return m;
}

PrespecWork prespec_work(int64_t round, const Outcome& outcome, std::vector<Speculation> next) {
  PrespecWork w;
  w.round = round;
  w.outcomes = outcome.seqs;
  w.feature_dim = outcome.feature_dim;
  w.next = std::move(next);
  return w;
}

DrafterStatsMsg stats_message(SsdDrafterCore& core, double busy_s) {
  const SsdDrafterStats& s = core.stats();
  DrafterStatsMsg m;
  m.rounds = s.rounds;
  m.hits = s.hits;
  m.misses = s.misses;
  m.fallback_primary = s.fallback_primary;
  m.fallback_backup = s.fallback_backup;
  m.hits_at_k = s.hits_at_k;
  m.outcomes_at_k = s.outcomes_at_k;
  m.mal_hit = s.mean_acceptance_length_hit();
  m.mal_miss = s.mean_acceptance_length_miss();
  m.branches = s.branches;
  m.branches_planned = s.branches_planned;
  m.branches_cached = s.branches_cached;
  m.prespec_cut = s.prespec_cut;
  m.predicted = s.predicted;
  m.prespec_s = s.prespec_s;
  m.fallback_s = s.fallback_s;
  m.busy_s = busy_s;
  m.fan_out_after_hit = s.fan_out_after_hit;
  m.fan_out_after_miss = s.fan_out_after_miss;
  m.critical_batch = core.miss_policy().critical_batch();
  return m;
}

DraftTree tree_of(const SeqSpeculation& s) {
  SSD_CHECK(s.q.size() == s.tokens.size(),
            "speculation for sequence {}: {} tokens but {} distributions", s.seq, s.tokens.size(),
            s.q.size());
  return DraftTree::chain(s.tokens, s.q);
}

}  // namespace ssd
