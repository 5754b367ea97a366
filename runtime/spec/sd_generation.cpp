#include "runtime/spec/sd_generation.h"

#include <algorithm>
#include <optional>

#include "runtime/core/error.h"
#include "runtime/generate/token_picker.h"
#include "runtime/spec/draft_hindsight.h"
#include "runtime/spec/verify_round.h"

namespace ssd {
namespace {

// Drafter sequences finished on every exit path; a finish that fails while unwinding is dropped
// (the error in flight is the one to report).
class DrafterSeqs {
 public:
  explicit DrafterSeqs(Drafter& d) : d_(d) {}
  DrafterSeqs(const DrafterSeqs&) = delete;
  DrafterSeqs& operator=(const DrafterSeqs&) = delete;
  ~DrafterSeqs() {
    for (int32_t s : live_) {
      try {
        d_.finish(s);
      } catch (...) {
      }
    }
  }
  void start(int32_t seq, std::span<const int32_t> prompt) {
    live_.reserve(live_.size() + 1);  // so that a started sequence is always recorded
    d_.start(seq, prompt);
    live_.push_back(seq);
  }
  void finish(int32_t seq) {
    const auto it = std::find(live_.begin(), live_.end(), seq);
    SSD_ASSERT(it != live_.end());
    live_.erase(it);
    d_.finish(seq);
  }

 private:
  Drafter& d_;
  std::vector<int32_t> live_;
};

}  // namespace

void size_stats(SdStats& s, int32_t k) {
  s.accept_hist.assign(k + 1, 0);
  s.pos_accepted.assign(k, 0);
  s.pos_offered.assign(k, 0);
  s.chosen_k_hist.assign(k + 1, 0);
}

void count_round(SdStats& s, const DraftTree& tree, const VerifyResult& v, int32_t k,
                 int32_t chosen_k) {
  s.rounds++;
  s.chosen_k_hist[std::clamp(chosen_k, 0, k)]++;
  s.accepted += v.accepted();
  s.drafted += static_cast<int64_t>(tree.size());
  s.verified_rows += 1 + static_cast<int64_t>(tree.size());
  s.empty_drafts += tree.empty() ? 1 : 0;
  s.full_accepts += v.all_accepted ? 1 : 0;
  s.accept_hist[std::min<int32_t>(v.accepted(), k)]++;
  for (int32_t j = 0; j < tree.max_depth(); ++j) s.pos_offered[j]++;
  for (int32_t j = 0; j < v.accepted(); ++j) s.pos_accepted[j]++;
}

namespace {

// One request inside the batch loop.
struct SdSeq {
  SeqId kv = -1;
  int32_t root = 0;      // last emitted token, not yet in the target's cache
  int32_t root_pos = 0;  // its position: the sequence's cached length
  bool running = false;
};

}  // namespace

double SdStats::mean_acceptance_length() const {
  return rounds == 0 ? 0.0 : 1.0 + static_cast<double>(accepted) / rounds;
}

std::vector<double> SdStats::acceptance_rate_per_position() const {
  std::vector<double> r(pos_offered.size(), 0.0);
  for (size_t j = 0; j < r.size(); ++j)
    r[j] = pos_offered[j] == 0 ? 0.0 : static_cast<double>(pos_accepted[j]) / pos_offered[j];
  return r;
}

double SdStats::mean_batch() const {
  return forwards == 0 ? 0.0 : static_cast<double>(rounds) / forwards;
}

namespace {

// One generate_sd_batch call: the requests, their sequences on the target and the drafter, the
// length policy, and the results so far. run() is prefill, then rounds of draft (one drafter
// call for every active request), verify (one target forward) and emit, until every request
// has finished.
class SdBatchRun {
 public:
  SdBatchRun(TargetModel& target, Drafter& drafter, std::span<const GenerationRequest> reqs,
             const SdOptions& opts, const BatchTokenCallback& on_token)
      : target_(target),
        drafter_(drafter),
        reqs_(reqs),
        opts_(opts),
        on_token_(on_token),
        vocab_(static_cast<int32_t>(target.config().vocab)),
        layers_(drafter.target_feature_layers()),
        tseqs_(target),
        dseqs_(drafter),
        seqs_(reqs.size()),
        hindsight_round_(reqs.size(), false) {
    for (int32_t l : layers_)
      SSD_CHECK(l >= 0 && l < target.config().n_layers,
                "drafter {} asks for target layer {}, but the target has layers 0..{}",
                drafter.name(), l, target.config().n_layers - 1);
    out_.requests.resize(reqs.size());
    size_stats(out_.stats, opts.k);
    for (SdResult& r : out_.requests) size_stats(r.stats, opts.k);
    if (!opts.length)
      own_length_.emplace(SpecLengthOptions{.k_max = opts.k, .automatic = opts.auto_k});
    length_ = opts.length ? opts.length : &*own_length_;
    SSD_CHECK(length_->options().k_max == opts.k && length_->options().automatic == opts.auto_k,
              "sd: the shared length policy (k_max {}, auto {}) does not match k {}, auto {}",
              length_->options().k_max, length_->options().automatic, opts.k, opts.auto_k);
  }

  SdBatchResult run() {
    start();
    std::vector<size_t> active;
    for (;;) {
      active.clear();
      for (size_t i = 0; i < seqs_.size(); ++i)
        if (seqs_[i].running) active.push_back(i);
      if (active.empty()) break;
      std::vector<int32_t> depth = depth_limits(active);
      std::vector<DraftTree> trees;
      if (opts_.auto_k && drafter_.drafts_cheaply()) {  // draft the range, then choose within it
        trees = draft(active, depth);
        for (size_t a = 0; a < active.size(); ++a) depth[a] = trees[a].max_depth();
        depth = choose_depths(active, depth);
        for (size_t a = 0; a < active.size(); ++a) {
          judge_whole_offer(active[a], trees[a]);
          trees[a] = trees[a].truncated(depth[a]);
        }
      } else {
        depth = choose_depths(active, depth);
        trees = draft(active, depth);
      }
      verify_and_emit(active, depth, trees);
    }
    return std::move(out_);
  }

 private:
  // Prefill exactly as AR does (collecting the drafter's features of the prompt), start the
  // drafter's sequences, and emit each request's first token from the prefill's logits.
  void start() {
    std::vector<PrefillResult> pre(reqs_.size());
    for (size_t i = 0; i < reqs_.size(); ++i) {
      seqs_[i].kv = tseqs_.create();
      pre[i] = prefill(target_, seqs_[i].kv, reqs_[i].prompt, reqs_[i].prefill_chunk, layers_);
      out_.requests[i].gen.prompt_tokens = static_cast<int64_t>(reqs_[i].prompt.size());
      out_.requests[i].gen.prefill_s = pre[i].seconds;
    }
    t_decode_ = monotonic_seconds();
    for (size_t i = 0; i < reqs_.size(); ++i) {
      const double td = monotonic_seconds();
      dseqs_.start(static_cast<int32_t>(i), reqs_[i].prompt);
      if (!layers_.empty()) drafter_.set_features(static_cast<int32_t>(i), 0, pre[i].features);
      drafter_time(i, td);
    }
    for (size_t i = 0; i < reqs_.size(); ++i) {
      const GenerationRequest& req = reqs_[i];
      SdSeq& s = seqs_[i];
      if (req.max_new_tokens == 0) {
        leave(i);
        continue;
      }
      s.root = target_.picker().sample(pre[i].last, 0, req.sampler, req.stream, 0);
      s.root_pos = static_cast<int32_t>(req.prompt.size());
      s.running = emit(i, s.root);
      const double td = monotonic_seconds();
      drafter_.commit(static_cast<int32_t>(i), {&s.root, 1});
      drafter_time(i, td);
      if (!s.running) leave(i);
    }
    out_.drafter_start_s = out_.stats.draft_s;
  }

  // A lookup's whole chain is judged against the output to come (draft_hindsight.h); its round
  // then reports that instead of the verified outcome. Trees with branches are not: which
  // branch the output follows says nothing about the others'.
  void judge_whole_offer(size_t i, const DraftTree& offer) {
    hindsight_round_[i] = !offer.empty() && offer.is_chain();
    if (hindsight_round_[i]) hindsight_.offer(static_cast<int32_t>(i), offer.tokens);
  }

  // Each active request's longest draft this round: k, clipped so that the round cannot decide
  // more tokens than the request has left.
  std::vector<int32_t> depth_limits(const std::vector<size_t>& active) const {
    std::vector<int32_t> depth(active.size());
    for (size_t a = 0; a < active.size(); ++a) {
      const size_t i = active[a];
      depth[a] = static_cast<int32_t>(
          std::clamp<int64_t>(reqs_[i].max_new_tokens - emitted(i) - 1, 0, opts_.k));
    }
    return depth;
  }

  // The depths the length policy chooses within `limit` (under --k auto; 0: a plain decode step
  // for that request).
  std::vector<int32_t> choose_depths(const std::vector<size_t>& active,
                                     const std::vector<int32_t>& limit) {
    std::vector<int32_t> ids(active.size());
    for (size_t a = 0; a < active.size(); ++a) ids[a] = static_cast<int32_t>(active[a]);
    return length_->choose(ids, limit);
  }

  // One drafter call for every active request with a non-zero depth.   returns [active.size()]
  // trees (empty for depth 0)
  std::vector<DraftTree> draft(const std::vector<size_t>& active,
                               const std::vector<int32_t>& depth) {
    std::vector<DraftRequest> drs;
    std::vector<size_t> drafted_by;  // active index of each draft request
    int64_t asked = 0;               // tokens asked of the drafter this round
    for (size_t a = 0; a < active.size(); ++a) {
      if (depth[a] == 0) continue;
      const size_t i = active[a];
      asked += depth[a];
      DraftRequest dr;
      dr.seq = static_cast<int32_t>(i);
      dr.k = depth[a];
      dr.width = opts_.width;
      dr.sampler = reqs_[i].sampler;
      dr.stream = reqs_[i].stream;
      dr.position = static_cast<uint32_t>(emitted(i));
      drs.push_back(std::move(dr));
      drafted_by.push_back(a);
    }
    std::vector<DraftTree> trees(active.size());
    const double td = monotonic_seconds();
    if (!drs.empty()) {
      std::vector<DraftTree> got = drafter_.draft(drs);
      SSD_CHECK(got.size() == drs.size(), "drafter {} returned {} trees for {} requests",
                drafter_.name(), got.size(), drs.size());
      for (size_t d = 0; d < got.size(); ++d) trees[drafted_by[d]] = std::move(got[d]);
    }
    const double draft_dt = monotonic_seconds() - td;
    round_draft_s_ = drs.empty() ? 0.0 : draft_dt;
    length_->observe_draft(asked, round_draft_s_);
    out_.stats.draft_s += draft_dt;
    for (size_t i : active) out_.requests[i].stats.draft_s += draft_dt;
    return trees;
  }

  // Verifies every active request's tree in one target forward, then emits each request's
  // accepted tokens and correction/bonus and tells the drafter the outcome.
  void verify_and_emit(const std::vector<size_t>& active, const std::vector<int32_t>& depth,
                       const std::vector<DraftTree>& trees) {
    std::vector<VerifyInput> inputs(active.size());
    for (size_t a = 0; a < active.size(); ++a)
      inputs[a] = verify_input(active[a], trees[a], depth[a]);
    const double tv = monotonic_seconds();
    const VerifyRoundResult round =
        verify_round(target_, inputs, layers_, drafter_.observes_target_logits());
    const double verify_dt = monotonic_seconds() - tv;
    int64_t rows = 0;
    for (const DraftTree& t : trees) rows += 1 + static_cast<int64_t>(t.size());
    length_->observe_verify(rows, verify_dt);
    out_.round_times.push_back({rows, round_draft_s_, verify_dt, 0});
    int64_t before = 0;
    for (size_t i : active) before += emitted(i);
    round_draft_s_ = 0;
    out_.stats.verify_s += verify_dt;
    out_.stats.target_forward_s += round.forward_s;
    out_.stats.forwards++;
    for (size_t a = 0; a < active.size(); ++a) {
      const size_t i = active[a];
      SdResult& r = out_.requests[i];
      const VerifyResult& v = round.seqs[a].result;
      r.stats.verify_s += verify_dt;
      r.stats.target_forward_s += round.forward_s;
      r.stats.forwards++;
      r.gen.forwards++;
      count_round(r.stats, trees[a], v, opts_.k, depth[a]);
      count_round(out_.stats, trees[a], v, opts_.k, depth[a]);
      out_.log.push_back({out_.stats.forwards - 1, static_cast<int32_t>(i),
                          static_cast<int32_t>(trees[a].size()), v.accepted()});
      if (!hindsight_round_[i])
        length_->observe_outcome(static_cast<int32_t>(i), trees[a].max_depth(), v.accepted());
      hindsight_round_[i] = false;
      apply(i, trees[a], v, round.logits(a), round.seqs[a].features);
    }
    int64_t after = 0;
    for (size_t i : active) after += emitted(i);
    out_.round_times.back().emitted = after - before;
  }

  // Request i's verification input, its tree checked against the vocabulary and its depth.
  VerifyInput verify_input(size_t i, const DraftTree& tree, int32_t depth) const {
    tree.validate(vocab_);
    for (size_t n = 0; n < tree.size(); ++n)
      SSD_CHECK(tree.depth(static_cast<int32_t>(n)) <= depth,
                "drafter {} returned a node at depth {} beyond k = {}", drafter_.name(),
                tree.depth(static_cast<int32_t>(n)), depth);
    VerifyInput in;
    in.kv_seq = seqs_[i].kv;
    in.root = seqs_[i].root;
    in.root_pos = seqs_[i].root_pos;
    in.tree = &tree;
    in.sampler = reqs_[i].sampler;
    in.stream = reqs_[i].stream;
    in.step = static_cast<uint32_t>(emitted(i));
    return in;
  }

  // Emits request i's tokens of verification `v` (stopping early at EOG or the budget), tells
  // the drafter what happened, and moves the root; the request leaves when it has finished.
  void apply(size_t i, const DraftTree& tree, const VerifyResult& v, const float* logits,
             std::span<const float> features) {
    SdSeq& s = seqs_[i];
    std::vector<int32_t> emitted_now;
    for (int32_t tok : v.emitted) {
      emitted_now.push_back(tok);
      s.running = emit(i, tok);
      if (!s.running) break;
    }
    resolved_.clear();
    hindsight_.emitted(static_cast<int32_t>(i), emitted_now, resolved_);
    for (const DraftHindsight::Resolved& r : resolved_)
      length_->observe_hindsight(static_cast<int32_t>(i), r.offered, r.repeated);
    const double td = monotonic_seconds();
    const int32_t dseq = static_cast<int32_t>(i);
    drafter_.observe(DraftOutcome{dseq, &tree, v.path, v.emitted, logits, vocab_});
    drafter_.commit(dseq, emitted_now);
    if (!layers_.empty()) drafter_.set_features(dseq, s.root_pos, features);
    drafter_time(i, td);
    s.root = v.emitted.back();
    s.root_pos += 1 + v.accepted();
    if (!s.running) leave(i);
  }

  int64_t emitted(size_t i) const {
    return static_cast<int64_t>(out_.requests[i].gen.tokens.size());
  }
  // Adds drafter time to the request and to the batch.
  void drafter_time(size_t i, double since) {
    const double dt = monotonic_seconds() - since;
    out_.requests[i].stats.draft_s += dt;
    out_.stats.draft_s += dt;
  }
  // Emits one token of request i: streams it, checks stop conditions. Returns false when the
  // request's generation ends.
  bool emit(size_t i, int32_t tok) {
    return emit_token(reqs_[i], out_.requests[i].gen, i, tok, on_token_);
  }
  // The request is done: its sequences are released at once.
  void leave(size_t i) {
    seqs_[i].running = false;
    out_.requests[i].gen.decode_s = monotonic_seconds() - t_decode_;
    tseqs_.release(seqs_[i].kv);
    const double td = monotonic_seconds();
    dseqs_.finish(static_cast<int32_t>(i));
    drafter_time(i, td);
    length_->finish(static_cast<int32_t>(i));
    hindsight_.finish(static_cast<int32_t>(i));
  }

  TargetModel& target_;
  Drafter& drafter_;
  std::span<const GenerationRequest> reqs_;
  const SdOptions& opts_;
  const BatchTokenCallback& on_token_;
  const int32_t vocab_;
  const std::vector<int32_t> layers_;  // target layers the drafter reads
  std::optional<SpecLengthController> own_length_;
  SpecLengthController* length_ = nullptr;
  TargetSeqs tseqs_;
  DrafterSeqs dseqs_;
  std::vector<SdSeq> seqs_;
  DraftHindsight hindsight_;             // whole lookup offers, judged by the output
  std::vector<bool> hindsight_round_;    // [reqs] this round's offer is judged in hindsight
  std::vector<DraftHindsight::Resolved> resolved_;
  SdBatchResult out_;
  double round_draft_s_ = 0;  // this round's draft call (0 until it drafts)
  double t_decode_ = 0;  // when decoding began (after the prefills)
};

}  // namespace

SdBatchResult generate_sd_batch(TargetModel& target, Drafter& drafter,
                                std::span<const GenerationRequest> reqs, const SdOptions& opts,
                                const BatchTokenCallback& on_token) {
  SSD_CHECK(opts.k >= 1 && opts.k <= 32, "--k {} must be between 1 and 32", opts.k);
  SSD_CHECK(opts.width >= 1 && opts.width <= 16, "--width {} must be between 1 and 16", opts.width);
  // A verification forward writes the root and the tree (width chains of up to k nodes from
  // every drafter here); with the draft depth clipped to the tokens still to come, a sequence
  // never holds more than prompt + max_new_tokens - 1 + (width - 1) x k positions, and its
  // positions stay below prompt + max_new_tokens. Reserving k x max(1, width - 1) covers both
  // (k, as before, for widths 1 and 2). A larger tree that overflows the cache fails its forward
  // with "KV cache full", the caches unchanged.
  check_batch_context(target, reqs, static_cast<int64_t>(opts.k) * std::max(1, opts.width - 1));
  return SdBatchRun(target, drafter, reqs, opts, on_token).run();
}

SdResult generate_sd(TargetModel& target, Drafter& drafter, const GenerationRequest& req,
                     const SdOptions& opts, const TokenCallback& on_token) {
  BatchTokenCallback cb;
  if (on_token) cb = [&](size_t, int32_t tok) { return on_token(tok); };
  return std::move(generate_sd_batch(target, drafter, {&req, 1}, opts, cb).requests.front());
}

}  // namespace ssd
