#include "runtime/saguaro/ssd_drafter_core.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "runtime/core/error.h"
#include "runtime/core/trace.h"
#include "runtime/saguaro/outcome_prediction.h"

namespace ssd {
namespace {

double now_s() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

size_t source_index(SpecSource s) { return static_cast<size_t>(s); }
static_assert(static_cast<size_t>(SpecSource::kDecodeStep) + 1 == SsdDrafterStats::kSources);

// Whether (k, bonus) is among the outcomes plan_branches() predicts for `spec`.
bool was_predicted(const Speculation& spec, int32_t k, int32_t bonus) {
  for (const PredictedOutcome& p : predict_outcomes(spec.tokens, spec.predicted, spec.fan_out))
    if (p.k == k && p.bonus == bonus) return true;
  return false;
}

// The empty speculation of a round whose length is 0 (see "Decode steps" at the top).
Speculation decode_step(int32_t seq, uint64_t id) {
  Speculation s;
  s.seq = seq;
  s.id = id;
  s.source = SpecSource::kDecodeStep;
  return s;
}

double mean_length(int64_t rounds, int64_t accepted) {
  return rounds == 0 ? 0.0 : 1.0 + static_cast<double>(accepted) / static_cast<double>(rounds);
}

}  // namespace

double SsdDrafterStats::hit_rate() const {
  const int64_t n = hits + misses;
  return n == 0 ? 0.0 : static_cast<double>(hits) / static_cast<double>(n);
}

double SsdDrafterStats::mean_acceptance_length_hit() const {
  const size_t c = source_index(SpecSource::kCache);
  return mean_length(rounds_by_source[c], accepted_by_source[c]);
}

double SsdDrafterStats::mean_acceptance_length_miss() const {
  const size_t p = source_index(SpecSource::kPrimary), b = source_index(SpecSource::kBackup);
  return mean_length(rounds_by_source[p] + rounds_by_source[b],
                     accepted_by_source[p] + accepted_by_source[b]);
}

double SsdDrafterStats::mean_acceptance_length() const {
  int64_t r = 0, a = 0;
  for (size_t i = 0; i < kSources; ++i) {
    r += rounds_by_source[i];
    a += accepted_by_source[i];
  }
  return mean_length(r, a);
}

SsdDrafterCore::SsdDrafterCore(Drafter& primary, Drafter* backup, const SsdDrafterOptions& opts)
    : primary_(primary),
      backup_(backup),
      opts_(opts),
      planner_(opts.fan_out, opts.k),  // checks k >= 1
      miss_(opts.miss) {
  SSD_CHECK(opts.k >= 1 && opts.k <= 32, "ssd: --k {} must be between 1 and 32", opts.k);
  validate(opts.sampler);
  SSD_CHECK(std::isfinite(opts.saguaro_c) && opts.saguaro_c > 0 && opts.saguaro_c <= 1,
            "--saguaro-c {} must be in (0, 1]", opts.saguaro_c);
  SSD_CHECK(opts.predict_top >= 0 && opts.predict_top <= 4096,
            "ssd: predict_top {} must be in 0..4096", opts.predict_top);
  SSD_CHECK(opts.prespec_chunk >= 0, "ssd: --prespec-chunk {} must not be negative",
            opts.prespec_chunk);
  int32_t max_f = opts.fan_out.budget;
  if (opts.fan_out.mode == FanOutMode::kLists) {
    max_f = 0;
    for (int32_t f : opts.fan_out.after_hit) max_f = std::max(max_f, f);
    for (int32_t f : opts.fan_out.after_miss) max_f = std::max(max_f, f);
  }
  predict_top_ = opts.predict_top > 0 ? opts.predict_top : max_f + 1;
  stats_.outcomes_at_k.assign(static_cast<size_t>(opts.k) + 1, 0);
  stats_.hits_at_k.assign(static_cast<size_t>(opts.k) + 1, 0);
  stats_.fan_out_after_hit = planner_.plan(opts.k, true);
  stats_.fan_out_after_miss = planner_.plan(opts.k, false);
}

SsdDrafterCore::SeqState& SsdDrafterCore::state(int32_t seq) {
  auto it = seqs_.find(seq);
  SSD_CHECK(it != seqs_.end(), "ssd drafter: sequence {} was not started", seq);
  return it->second;
}

const SsdDrafterCore::SeqState& SsdDrafterCore::state(int32_t seq) const {
  auto it = seqs_.find(seq);
  SSD_CHECK(it != seqs_.end(), "ssd drafter: sequence {} was not started", seq);
  return it->second;
}

const Speculation& SsdDrafterCore::speculation(int32_t seq) const {
  const SeqState& s = state(seq);
  SSD_CHECK(s.has_spec, "ssd drafter: sequence {} has no speculation yet", seq);
  return s.spec;
}

void SsdDrafterCore::set_memory_scope(uint64_t scope) {
  primary_.set_memory_scope(scope);
  if (backup_) backup_->set_memory_scope(scope);
}

void SsdDrafterCore::start(int32_t seq, std::span<const int32_t> prompt,
                           std::span<const int32_t> emitted, uint64_t stream) {
  SSD_CHECK(!prompt.empty() || !emitted.empty(), "ssd drafter: sequence {} starts empty", seq);
  finish(seq);  // a restarted sequence begins afresh
  std::vector<int32_t> context(prompt.begin(), prompt.end());
  primary_.start(seq, context);
  if (backup_) backup_->start(seq, context);
  if (!emitted.empty()) {
    primary_.commit(seq, emitted);
    if (backup_) backup_->commit(seq, emitted);
  }
  SeqState s;
  s.stream = stream;
  s.emitted = static_cast<int64_t>(emitted.size());
  seqs_.emplace(seq, std::move(s));
}

void SsdDrafterCore::finish(int32_t seq) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) return;
  primary_.finish(seq);
  if (backup_) backup_->finish(seq);
  seqs_.erase(it);
}

void SsdDrafterCore::set_features(int32_t seq, int64_t from, std::span<const float> features) {
  state(seq);
  primary_.set_features(seq, from, features);
}

DraftRequest SsdDrafterCore::request(int32_t seq, const SeqState& s, std::vector<int32_t> suffix,
                                     uint32_t position, const std::vector<int32_t>& fan_out,
                                     int32_t k) const {
  DraftRequest r;
  r.seq = seq;
  r.suffix = std::move(suffix);
  r.width = 1;
  r.sampler = opts_.sampler;
  r.stream = s.stream;
  r.position = position;
  if (opts_.plain) {  // as single-process SD asks (sd_generation.cpp)
    r.k = k;
    return r;
  }
  r.k = k + 1;  // the (k + 1)-th position's ranking predicts the bonus at k
  r.predict_top = predict_top_;
  if (opts_.saguaro_c < 1 && !is_greedy(opts_.sampler)) {
    const size_t n = std::min(fan_out.size(), static_cast<size_t>(opts_.k));
    r.saguaro_top_f.assign(fan_out.begin(), fan_out.begin() + n);  // depths 1..K: F_0..F_{K-1}
    r.saguaro_c = opts_.saguaro_c;
  }
  return r;
}

Speculation SsdDrafterCore::from_tree(int32_t seq, DraftTree tree, SpecSource source,
                                      const std::vector<int32_t>& fan_out, bool after_hit) const {
  SSD_CHECK(tree.is_chain(),
            "ssd drafter: the drafter returned a tree, not a chain, for sequence {}", seq);
  const size_t n = tree.size();
  const size_t kk = std::min<size_t>(n, static_cast<size_t>(opts_.k));
  Speculation s;
  s.seq = seq;
  s.source = source;
  s.tokens.assign(tree.tokens.begin(), tree.tokens.begin() + kk);
  s.q.assign(std::make_move_iterator(tree.q.begin()), std::make_move_iterator(tree.q.begin() + kk));
  if (!tree.predicted.empty()) {
    const size_t np = std::min({n, kk + 1, tree.predicted.size()});
    s.predicted.assign(std::make_move_iterator(tree.predicted.begin()),
                       std::make_move_iterator(tree.predicted.begin() + np));
  }
  s.fan_out = kk == static_cast<size_t>(opts_.k) && fan_out.size() == kk + 1
                  ? fan_out
                  : planner_.plan(static_cast<int32_t>(kk), after_hit);
  return s;
}

Speculation SsdDrafterCore::ranked_decode_step(int32_t seq, uint64_t id) {
  Speculation s = decode_step(seq, id);
  if (opts_.plain || !primary_.drafts_cheaply()) return s;
  const SeqState& st = state(seq);
  const std::vector<int32_t> plan = planner_.plan(0, false);
  const std::vector<DraftRequest> reqs{
      request(seq, st, {}, static_cast<uint32_t>(st.emitted), plan, 0)};
  std::vector<DraftTree> trees = primary_.draft(reqs);
  if (trees.size() == 1 && !trees[0].predicted.empty()) {
    s.predicted = {std::move(trees[0].predicted[0])};
    s.fan_out = plan;
  }
  return s;
}

void SsdDrafterCore::cut(Speculation& spec, int32_t k, bool after_hit) const {
  const size_t n = static_cast<size_t>(k);
  if (k < 0 || spec.tokens.size() <= n) return;  // -1: K
  spec.tokens.resize(n);
  spec.q.resize(n);
  if (spec.predicted.size() > n + 1) spec.predicted.resize(n + 1);
  spec.fan_out = opts_.plain ? std::vector<int32_t>{} : planner_.plan(k, after_hit);
}

std::vector<Speculation> SsdDrafterCore::first_speculations(std::span<const int32_t> seqs,
                                                            std::span<const int32_t> ks) {
  SSD_CHECK(ks.empty() || ks.size() == seqs.size(),
            "ssd drafter: {} speculation lengths for {} sequences", ks.size(), seqs.size());
  const double t0 = now_s();
  std::vector<RoundOutcome> wanted(seqs.size());  // only seq and next_k are read
  std::vector<size_t> all(seqs.size());
  for (size_t i = 0; i < seqs.size(); ++i) {
    SSD_CHECK(!state(seqs[i]).has_spec, "ssd drafter: sequence {} already has a speculation",
              seqs[i]);
    wanted[i].seq = seqs[i];
    wanted[i].next_k = ks.empty() ? -1 : ks[i];
    all[i] = i;
  }
  std::vector<Speculation> out(seqs.size());
  fallback(wanted, all, out, /*initial=*/true);
  for (size_t i = 0; i < seqs.size(); ++i) {
    SeqState& s = state(seqs[i]);
    if (!out[i].decode_step()) out[i].source = SpecSource::kInitial;
    out[i].id = 0;
    out[i].asked = ks.empty() || ks[i] < 0 ? opts_.k : ks[i];  // -1: K
    s.spec = out[i];
    s.has_spec = true;
  }
  stats_.initial_s += now_s() - t0;
  return out;
}

void SsdDrafterCore::check_outcomes(std::span<const RoundOutcome> outcomes) const {
  for (size_t i = 0; i < outcomes.size(); ++i) {
    const RoundOutcome& o = outcomes[i];
    const SeqState& s = state(o.seq);
    SSD_CHECK(s.has_spec, "ssd drafter: outcome for sequence {}, which has no speculation", o.seq);
    for (size_t j = 0; j < i; ++j)
      SSD_CHECK(outcomes[j].seq != o.seq, "ssd drafter: two outcomes for sequence {} in one round",
                o.seq);
    SSD_CHECK(o.next_k >= -1 && o.next_k <= opts_.k,
              "ssd drafter: speculation length {} for sequence {} is outside 0..{}", o.next_k,
              o.seq, opts_.k);
    check_outcome(o, s.spec);
    check_features(o);
    if (o.given) check_given(o, opts_.k);
  }
}

// A speculation the leader drafted: from a lookup (primary or backup), q beside every token, no
// longer than K nor than the length asked, and not for a decode step.
void SsdDrafterCore::check_given(const RoundOutcome& o, int32_t k_max) {
  const Speculation& g = *o.given;
  SSD_CHECK(g.source == SpecSource::kPrimary || g.source == SpecSource::kBackup,
            "ssd drafter: the leader-drafted speculation of sequence {} has source {}", o.seq,
            spec_source_name(g.source));
  SSD_CHECK(g.q.size() == g.tokens.size(),
            "ssd drafter: the leader-drafted speculation of sequence {} has {} tokens but {} "
            "distributions",
            o.seq, g.tokens.size(), g.q.size());
  const int32_t asked = o.next_k < 0 ? k_max : o.next_k;
  SSD_CHECK(o.next_k != 0 && static_cast<int32_t>(g.tokens.size()) <= asked,
            "ssd drafter: the leader-drafted speculation of sequence {} has {} tokens for a "
            "length of {} asked",
            o.seq, g.tokens.size(), asked);
}

// An outcome's feature rows come from a peer: a count below zero, a width other than the
// drafter's, or a size that overflows would make commit() read outside the rows that arrived.
void SsdDrafterCore::check_features(const RoundOutcome& o) const {
  SSD_CHECK(o.feature_rows >= 0, "ssd drafter: outcome of sequence {} has {} feature rows", o.seq,
            o.feature_rows);
  if (o.feature_rows == 0 || !o.features) return;
  SSD_CHECK(o.feature_dim == feature_dim(),
            "ssd drafter: outcome of sequence {} has feature rows of {} floats; the drafter reads "
            "rows of {}",
            o.seq, o.feature_dim, feature_dim());
  int64_t floats = 0;
  SSD_CHECK(!__builtin_mul_overflow(o.feature_rows, o.feature_dim, &floats),
            "ssd drafter: outcome of sequence {}: {} feature rows of {} floats overflow", o.seq,
            o.feature_rows, o.feature_dim);
}

void SsdDrafterCore::check_outcome(const RoundOutcome& o, const Speculation& spec) {
  const int32_t n = static_cast<int32_t>(spec.tokens.size());
  SSD_CHECK(o.accepted >= 0 && o.accepted <= n,
            "ssd drafter: outcome of sequence {} accepts {} of {} speculated tokens", o.seq,
            o.accepted, n);
  SSD_CHECK(static_cast<int32_t>(o.emitted.size()) == o.accepted + 1,
            "ssd drafter: outcome of sequence {} has {} emitted tokens for {} accepted (expected "
            "accepted + 1)",
            o.seq, o.emitted.size(), o.accepted);
  for (int32_t i = 0; i < o.accepted; ++i)
    SSD_CHECK(o.emitted[i] == spec.tokens[i],
              "ssd drafter: outcome of sequence {} emits {} at accepted position {}, but the "
              "speculation has {} there",
              o.seq, o.emitted[i], i, spec.tokens[i]);
}

void SsdDrafterCore::commit(const RoundOutcome& o, const Speculation& spec, SeqState& s) {
  if (o.target_logits) {  // DraftOutcome promises the target's rows (see the top of the header)
    DraftTree tree = spec.tree();
    DraftOutcome d;
    d.seq = o.seq;
    d.tree = &tree;
    for (int32_t i = 0; i < o.accepted; ++i) d.path.push_back(i);
    d.emitted = o.emitted;
    d.target_logits = o.target_logits;
    d.vocab = o.vocab;
    primary_.observe(d);
  }
  primary_.commit(o.seq, o.emitted);
  if (backup_) backup_->commit(o.seq, o.emitted);
  s.emitted += static_cast<int64_t>(o.emitted.size());
  // The accepted tokens' target features arrive with the outcome; they follow the commit (they
  // describe positions the context now holds) and precede any draft after it.
  if (o.features && o.feature_rows > 0) {
    const size_t dim = o.feature_dim;
    primary_.set_features(o.seq, o.features_from,
                          std::span<const float>(o.features, o.feature_rows * dim));
  }
}

std::vector<Speculation> SsdDrafterCore::on_outcome(std::span<const RoundOutcome> outcomes) {
  check_outcomes(outcomes);  // before any state changes: a bad outcome changes nothing
  std::vector<Speculation> out(outcomes.size());
  std::vector<size_t> missed, given;
  for (size_t i = 0; i < outcomes.size(); ++i) {
    const RoundOutcome& o = outcomes[i];
    SeqState& s = state(o.seq);
    const Speculation spec = std::move(s.spec);
    s.has_spec = false;
    if (s.has_shadow) {  // what the backup would have had accepted (greedy: a prefix match)
      int32_t m = 0;
      while (static_cast<size_t>(m) < s.shadow.size() && static_cast<size_t>(m) < o.emitted.size() &&
             s.shadow[static_cast<size_t>(m)] == o.emitted[static_cast<size_t>(m)])
        ++m;
      miss_.observe_shadow(m);
      s.shadow.clear();
      s.has_shadow = false;
    }
    commit(o, spec, s);

    const int32_t k = o.accepted;
    const int32_t bonus = o.emitted.back();
    stats_.rounds_by_source[source_index(spec.source)]++;
    stats_.accepted_by_source[source_index(spec.source)] += k;
    if (!spec.decode_step()) {  // a decode step predicted nothing and was drafted by no one
      stats_.rounds++;
      stats_.outcomes_at_k[k]++;
      miss_.observe_round(spec.source, k);
      stats_.predicted += learn_plan(spec, k, bonus) ? 1 : 0;
    }
    if (o.next_k == 0) {  // a plain decode step next: no lookup (neither hit nor miss), no draft
      out[i] = ranked_decode_step(o.seq, spec.id + 1);
      continue;
    }

    if (o.given) {  // the leader drafted it (see "Misses drafted by the target leader")
      miss_.observe_lookup(false);
      stats_.misses++;
      stats_.leader_drafted++;
      given.push_back(i);
      out[i].id = spec.id + 1;
      continue;
    }
    std::optional<Speculation> hit = cache_.lookup(o.seq, spec.id, k, bonus);
    miss_.observe_lookup(hit.has_value());
    if (hit) {
      stats_.hits++;
      stats_.hits_at_k[k]++;
      out[i] = std::move(*hit);
      out[i].seq = o.seq;
      out[i].source = SpecSource::kCache;
    } else {
      stats_.misses++;
      missed.push_back(i);
    }
    out[i].id = spec.id + 1;
  }

  if (!missed.empty()) fallback(outcomes, missed, out);
  if (!given.empty()) adopt_given(outcomes, given, out);
  for (size_t i = 0; i < outcomes.size(); ++i) {
    if (out[i].source == SpecSource::kCache) cut(out[i], outcomes[i].next_k, true);
    out[i].asked = outcomes[i].next_k < 0 ? opts_.k : outcomes[i].next_k;
    SeqState& s = state(outcomes[i].seq);
    s.spec = out[i];
    s.has_spec = true;
  }
  stats_.fan_out_after_hit = planner_.plan(opts_.k, true);
  stats_.fan_out_after_miss = planner_.plan(opts_.k, false);
  return out;
}

bool SsdDrafterCore::primary_answers_miss(int32_t batch) const {
  return opts_.plain || !backup_ || miss_.choose(batch) == Fallback::kPrimary;
}

MissLookup SsdDrafterCore::miss_lookup(int32_t batch) const {
  if (opts_.plain) return MissLookup::kNone;  // SD: the drafter rank drafts every answer
  if (primary_answers_miss(batch))
    return primary_.drafts_cheaply() ? MissLookup::kPrimary : MissLookup::kNone;
  return backup_->drafts_cheaply() ? MissLookup::kBackup : MissLookup::kNone;
}

void SsdDrafterCore::adopt_given(std::span<const RoundOutcome> outcomes,
                                 std::span<const size_t> given, std::vector<Speculation>& out) {
  const std::vector<int32_t> plan = planner_.plan(opts_.k, false);
  for (const SpecSource source : {SpecSource::kPrimary, SpecSource::kBackup}) {
    Drafter* d = source == SpecSource::kPrimary ? &primary_ : backup_;
    const bool ranks = d && d->drafts_cheaply();  // else adopted unranked: no branches after it
    std::vector<DraftRequest> reqs;
    std::vector<size_t> mine;  // outcome index of each request
    for (size_t i : given) {
      const RoundOutcome& o = outcomes[i];
      if (o.given->source != source) continue;
      const SeqState& s = state(o.seq);
      const int32_t k = std::max<int32_t>(1, static_cast<int32_t>(o.given->tokens.size()));
      if (ranks)
        reqs.push_back(request(o.seq, s, {}, static_cast<uint32_t>(s.emitted), plan, k));
      mine.push_back(i);
    }
    std::vector<DraftTree> trees = reqs.empty() ? std::vector<DraftTree>{} : d->draft(reqs);
    for (size_t j = 0; j < mine.size(); ++j) {
      const size_t i = mine[j];
      const Speculation& g = *outcomes[i].given;
      const uint64_t id = out[i].id;
      Speculation own = j < trees.size() ? from_tree(outcomes[i].seq, std::move(trees[j]), source,
                                                     plan, false)
                                         : Speculation{};
      // The ranking at position p is conditioned on tokens 0..p-1: valid while the drafts agree.
      size_t agree = 0;
      while (agree < own.tokens.size() && agree < g.tokens.size() &&
             own.tokens[agree] == g.tokens[agree])
        ++agree;
      if (own.predicted.size() > agree + 1) own.predicted.resize(agree + 1);
      out[i] = Speculation{};
      out[i].seq = outcomes[i].seq;
      out[i].id = id;
      out[i].source = source;
      out[i].tokens = g.tokens;
      out[i].q = g.q;
      out[i].predicted = std::move(own.predicted);
      out[i].fan_out = planner_.plan(static_cast<int32_t>(g.tokens.size()), false);
    }
  }
}

void SsdDrafterCore::fallback(std::span<const RoundOutcome> outcomes,
                              std::span<const size_t> missed, std::vector<Speculation>& out,
                              bool initial) {
  const bool use_primary =
      initial || primary_answers_miss(static_cast<int32_t>(outcomes.size()));
  // The timeline names who answered: a backup's drafts are other draws than SD's (sampled SSD
  // equals sampled SD draw for draw only through the primary).
  trace::Span span(initial       ? "first draft"
                   : use_primary ? "fallback draft"
                                 : "fallback draft (backup)",
                   "drafter", trace::round(), static_cast<int64_t>(missed.size()));
  const double t0 = now_s();
  Drafter& d = use_primary ? primary_ : *backup_;
  const SpecSource source = use_primary ? SpecSource::kPrimary : SpecSource::kBackup;
  const std::vector<int32_t> plan = planner_.plan(opts_.k, false);
  std::vector<DraftRequest> reqs;
  std::vector<size_t> drafted;  // outcome index of each request
  for (size_t i : missed) {
    const RoundOutcome& o = outcomes[i];
    SSD_CHECK(o.next_k >= -1 && o.next_k <= opts_.k,
              "ssd drafter: speculation length {} for sequence {} is outside 0..{}", o.next_k,
              o.seq, opts_.k);
    const int32_t k = o.next_k < 0 ? opts_.k : o.next_k;
    const uint64_t id = out[i].id;
    out[i] = Speculation{};
    out[i].seq = o.seq;
    out[i].id = id;
    out[i].source = source;
    if (k == 0) {  // a plain decode step: nothing to draft, nothing to rank for pre-speculation
      out[i] = ranked_decode_step(o.seq, id);
      continue;
    }
    const SeqState& s = state(o.seq);
    reqs.push_back(request(o.seq, s, {}, static_cast<uint32_t>(s.emitted), plan, k));
    drafted.push_back(i);
  }
  if (reqs.empty()) return;
  std::vector<DraftTree> trees = d.draft(reqs);
  SSD_CHECK(trees.size() == reqs.size(), "ssd drafter: {} returned {} drafts for {} requests",
            d.name(), trees.size(), reqs.size());
  const double dt = now_s() - t0;
  if (!initial) {  // round 0 is not a miss: its time is initial_s, counted by the caller
    stats_.fallback_s += dt;
    (use_primary ? stats_.fallback_primary : stats_.fallback_backup) +=
        static_cast<int64_t>(drafted.size());
    if (use_primary) miss_.observe_primary_draft(static_cast<int32_t>(drafted.size()), dt);
  }
  for (size_t j = 0; j < drafted.size(); ++j) {
    const size_t i = drafted[j];
    const uint64_t id = out[i].id;
    out[i] = from_tree(outcomes[i].seq, std::move(trees[j]), source, plan, false);
    out[i].id = id;
    cut(out[i], outcomes[i].next_k < 0 ? opts_.k : outcomes[i].next_k, false);
  }
  // The backup beside a primary fallback, unused but scored at the outcome (miss_policy.h,
  // "Never worse than SD"): a lookup costs microseconds; with sampling a prefix match is not an
  // acceptance, so only greedy runs measure it so.
  if (use_primary && !initial && !opts_.plain && backup_ && backup_->drafts_cheaply() &&
      is_greedy(opts_.sampler)) {
    std::vector<DraftTree> shadow = backup_->draft(reqs);
    for (size_t j = 0; j < drafted.size() && j < shadow.size(); ++j) {
      const size_t n = std::min(shadow[j].tokens.size(), out[drafted[j]].tokens.size());
      SeqState& st = state(outcomes[drafted[j]].seq);
      st.shadow.assign(shadow[j].tokens.begin(), shadow[j].tokens.begin() + n);
      st.has_shadow = true;
    }
  }
}

void SsdDrafterCore::adopt(std::span<const RoundOutcome> outcomes,
                           std::span<const Speculation> next) {
  check_outcomes(outcomes);
  for (const Speculation& sp : next) state(sp.seq);
  for (const RoundOutcome& o : outcomes) {
    SeqState& s = state(o.seq);
    const Speculation spec = std::move(s.spec);
    s.has_spec = false;
    commit(o, spec, s);
    learn_plan(spec, o.accepted, o.emitted.back());  // the lead's plan, from the same outcomes
  }
  for (const Speculation& sp : next) {
    SeqState& s = state(sp.seq);
    s.spec = sp;
    s.has_spec = true;
  }
}

bool SsdDrafterCore::learn_plan(const Speculation& spec, int32_t k, int32_t bonus) {
  planner_.estimator().observe_round(static_cast<int32_t>(spec.tokens.size()), k);
  // Whether the outcome was planned, not whether it was drafted in time (a cut is not a worse
  // prediction); a cache hit is always a planned outcome, so this needs no cache.
  const bool planned = was_predicted(spec, k, bonus);
  const int32_t f = static_cast<size_t>(k) < spec.fan_out.size() ? spec.fan_out[k] : 0;
  planner_.estimator().observe_prediction(f, planned);
  return planned;
}

std::vector<Branch> SsdDrafterCore::plan_branches() const {
  const std::vector<int32_t> plan = planner_.plan(opts_.k, true);  // what a hit is predicted with
  const double a = std::clamp(planner_.estimator().a_p(), 0.01, 0.99);
  std::vector<std::vector<Branch>> per_seq;  // [sequences][their branches, k then rank]
  for (const auto& [seq, s] : seqs_) {
    if (!s.has_spec || !s.spec.plannable()) continue;  // see "Decode steps" at the top
    const Speculation& sp = s.spec;
    const int32_t n = static_cast<int32_t>(sp.tokens.size());
    std::vector<Branch>& mine = per_seq.emplace_back();
    for (const PredictedOutcome& p : predict_outcomes(sp.tokens, sp.predicted, sp.fan_out)) {
      Branch b;
      b.seq = seq;
      b.parent = sp.id;
      b.k = p.k;
      b.bonus = p.bonus;
      b.suffix.assign(sp.tokens.begin(), sp.tokens.begin() + p.k);
      b.suffix.push_back(p.bonus);
      b.position = static_cast<uint32_t>(s.emitted + p.k + 1);
      b.fan_out = plan;
      b.depth = std::min(opts_.k, (sp.asked < 0 ? opts_.k : sp.asked) + kDepthMargin);
      const double reach = std::pow(a, p.k) * (p.k < n ? 1 - a : 1);  // P(k accepted)
      b.weight = reach * p.prob;
      mine.push_back(std::move(b));
    }
  }
  // Round-robin over the sequences (each one's i-th branch, then the (i + 1)-th), then likeliest
  // first, stably: equal weights (a drafter without probabilities) keep the round-robin, so a
  // pre-speculation cut short serves every sequence alike.
  std::vector<Branch> out;
  for (size_t i = 0;; ++i) {
    bool any = false;
    for (std::vector<Branch>& mine : per_seq)
      if (i < mine.size()) {
        out.push_back(std::move(mine[i]));
        any = true;
      }
    if (!any) break;
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const Branch& x, const Branch& y) { return x.weight > y.weight; });
  return out;
}

void SsdDrafterCore::install(std::vector<CacheEntry> entries, int64_t planned) {
  SSD_CHECK(static_cast<int64_t>(entries.size()) <= planned,
            "ssd drafter: {} cache entries installed for a plan of {} branches", entries.size(),
            planned);
  stats_.branches_planned += planned;
  stats_.branches_cached += static_cast<int64_t>(entries.size());
  if (static_cast<int64_t>(entries.size()) < planned) stats_.prespec_cut++;
  cache_.replace(std::move(entries));
}

std::vector<CacheEntry> SsdDrafterCore::draft_branches(std::span<const Branch> branches) {
  std::vector<CacheEntry> out;
  if (branches.empty()) return out;
  const double t0 = now_s();
  const std::vector<int32_t> own_plan = planner_.plan(opts_.k, true);
  std::vector<const std::vector<int32_t>*> plans;  // [branches]
  std::vector<DraftRequest> reqs;
  for (const Branch& b : branches) {
    const SeqState& s = state(b.seq);
    SSD_CHECK(b.suffix.size() == static_cast<size_t>(b.k) + 1,
              "ssd drafter: branch of sequence {} at k = {} has a suffix of {} tokens", b.seq, b.k,
              b.suffix.size());
    SSD_CHECK(b.fan_out.empty() || b.fan_out.size() == static_cast<size_t>(opts_.k) + 1,
              "ssd drafter: branch of sequence {} has a fan-out of {} entries for K = {}", b.seq,
              b.fan_out.size(), opts_.k);
    plans.push_back(b.fan_out.empty() ? &own_plan : &b.fan_out);
    SSD_CHECK(b.depth >= 0 && b.depth <= opts_.k,
              "ssd drafter: branch of sequence {} has depth {} for K = {}", b.seq, b.depth,
              opts_.k);
    reqs.push_back(request(b.seq, s, b.suffix, b.position, *plans.back(),
                           b.depth > 0 ? b.depth : opts_.k));
  }
  std::vector<DraftTree> trees = primary_.draft(reqs);
  SSD_CHECK(trees.size() == reqs.size(), "ssd drafter: {} returned {} drafts for {} requests",
            primary_.name(), trees.size(), reqs.size());
  for (size_t i = 0; i < branches.size(); ++i) {
    const Branch& b = branches[i];
    CacheEntry e;
    e.seq = b.seq;
    e.parent = b.parent;
    e.k = b.k;
    e.bonus = b.bonus;
    e.spec = from_tree(b.seq, std::move(trees[i]), SpecSource::kCache, *plans[i], true);
    out.push_back(std::move(e));
  }
  stats_.prespec_calls++;
  stats_.branches += static_cast<int64_t>(branches.size());
  stats_.prespec_s += now_s() - t0;
  return out;
}

}  // namespace ssd
