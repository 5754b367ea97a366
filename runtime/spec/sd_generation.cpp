#include "runtime/spec/sd_generation.h"

#include <algorithm>
#include <optional>

#include "runtime/core/error.h"
#include "runtime/generate/token_picker.h"
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

namespace {

int32_t max_depth(const DraftTree& tree) {
  int32_t d = 0;
  for (size_t i = 0; i < tree.size(); ++i) d = std::max(d, tree.depth(static_cast<int32_t>(i)));
  return d;
}

}  // namespace

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
  for (int32_t j = 0; j < max_depth(tree); ++j) s.pos_offered[j]++;
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

  const int32_t vocab = static_cast<int32_t>(target.config().vocab);
  const std::vector<int32_t> layers = drafter.target_feature_layers();
  for (int32_t l : layers)
    SSD_CHECK(l >= 0 && l < target.config().n_layers,
              "drafter {} asks for target layer {}, but the target has layers 0..{}",
              drafter.name(), l, target.config().n_layers - 1);
  const size_t n_req = reqs.size();
  SdBatchResult out;
  out.requests.resize(n_req);
  size_stats(out.stats, opts.k);
  for (SdResult& r : out.requests) size_stats(r.stats, opts.k);
  std::optional<SpecLengthController> own_length;
  if (!opts.length) own_length.emplace(SpecLengthOptions{.k_max = opts.k, .automatic = opts.auto_k});
  SpecLengthController& length = opts.length ? *opts.length : *own_length;
  SSD_CHECK(length.options().k_max == opts.k && length.options().automatic == opts.auto_k,
            "sd: the shared length policy (k_max {}, auto {}) does not match k {}, auto {}",
            length.options().k_max, length.options().automatic, opts.k, opts.auto_k);
  TargetSeqs tseqs(target);
  DrafterSeqs dseqs(drafter);
  std::vector<SdSeq> seqs(n_req);

  // Prefill exactly as AR does, collecting the drafter's features of the prompt.
  std::vector<PrefillResult> pre(n_req);
  for (size_t i = 0; i < n_req; ++i) {
    seqs[i].kv = tseqs.create();
    pre[i] = prefill(target, seqs[i].kv, reqs[i].prompt, reqs[i].prefill_chunk, layers);
    out.requests[i].gen.prompt_tokens = static_cast<int64_t>(reqs[i].prompt.size());
    out.requests[i].gen.prefill_s = pre[i].seconds;
  }

  const double t1 = monotonic_seconds();
  // Adds drafter time to the request and to the batch.
  auto drafter_time = [&](size_t i, double since) {
    const double dt = monotonic_seconds() - since;
    out.requests[i].stats.draft_s += dt;
    out.stats.draft_s += dt;
  };
  // The request is done: its sequences are released at once.
  auto leave = [&](size_t i) {
    seqs[i].running = false;
    out.requests[i].gen.decode_s = monotonic_seconds() - t1;
    tseqs.release(seqs[i].kv);
    const double td = monotonic_seconds();
    dseqs.finish(static_cast<int32_t>(i));
    drafter_time(i, td);
    length.finish(static_cast<int32_t>(i));
  };
  // Emits one token of request i: streams it, checks stop conditions. Returns false when the
  // request's generation ends.
  auto emit = [&](size_t i, int32_t tok) {
    return emit_token(reqs[i], out.requests[i].gen, i, tok, on_token);
  };

  for (size_t i = 0; i < n_req; ++i) {
    const double td = monotonic_seconds();
    dseqs.start(static_cast<int32_t>(i), reqs[i].prompt);
    if (!layers.empty()) drafter.set_features(static_cast<int32_t>(i), 0, pre[i].features);
    drafter_time(i, td);
  }
  for (size_t i = 0; i < n_req; ++i) {
    const GenerationRequest& req = reqs[i];
    SdSeq& s = seqs[i];
    if (req.max_new_tokens == 0) {
      leave(i);
      continue;
    }
    // The first token comes from the prefill's logits, as in AR.
    s.root = target.picker().sample(pre[i].last, 0, req.sampler, req.stream, 0);
    s.root_pos = static_cast<int32_t>(req.prompt.size());
    s.running = emit(i, s.root);
    const double td = monotonic_seconds();
    drafter.commit(static_cast<int32_t>(i), {&s.root, 1});
    drafter_time(i, td);
    if (!s.running) leave(i);
  }
  pre.clear();

  std::vector<size_t> active;
  for (;;) {
    active.clear();
    for (size_t i = 0; i < n_req; ++i)
      if (seqs[i].running) active.push_back(i);
    if (active.empty()) break;

    // One drafter call for every active request that still has room for a draft: the depth is
    // clipped so that the round cannot decide more tokens than the request has left, and chosen
    // by the length policy under --k auto (0: a plain decode step for that request).
    std::vector<int32_t> depth(active.size()), ids(active.size());
    for (size_t a = 0; a < active.size(); ++a) {
      const size_t i = active[a];
      const int64_t emitted = static_cast<int64_t>(out.requests[i].gen.tokens.size());
      ids[a] = static_cast<int32_t>(i);
      depth[a] = static_cast<int32_t>(
          std::clamp<int64_t>(reqs[i].max_new_tokens - emitted - 1, 0, opts.k));
    }
    depth = length.choose(ids, depth);
    std::vector<DraftRequest> drs;
    std::vector<size_t> drafted_by;  // active index of each draft request
    int64_t asked = 0;               // tokens asked of the drafter this round
    for (size_t a = 0; a < active.size(); ++a) {
      const size_t i = active[a];
      const GenerationRequest& req = reqs[i];
      const int64_t emitted = static_cast<int64_t>(out.requests[i].gen.tokens.size());
      if (depth[a] == 0) continue;
      asked += depth[a];
      DraftRequest dr;
      dr.seq = static_cast<int32_t>(i);
      dr.k = depth[a];
      dr.width = opts.width;
      dr.sampler = req.sampler;
      dr.stream = req.stream;
      dr.position = static_cast<uint32_t>(emitted);
      drs.push_back(std::move(dr));
      drafted_by.push_back(a);
    }
    std::vector<DraftTree> trees(active.size());
    double td = monotonic_seconds();
    if (!drs.empty()) {
      std::vector<DraftTree> got = drafter.draft(drs);
      SSD_CHECK(got.size() == drs.size(), "drafter {} returned {} trees for {} requests",
                drafter.name(), got.size(), drs.size());
      for (size_t d = 0; d < got.size(); ++d) trees[drafted_by[d]] = std::move(got[d]);
    }
    const double draft_dt = monotonic_seconds() - td;
    length.observe_draft(asked, drs.empty() ? 0.0 : draft_dt);
    out.stats.draft_s += draft_dt;
    for (size_t i : active) out.requests[i].stats.draft_s += draft_dt;

    std::vector<VerifyInput> inputs(active.size());
    for (size_t a = 0; a < active.size(); ++a) {
      const size_t i = active[a];
      const DraftTree& tree = trees[a];
      tree.validate(vocab);
      for (size_t n = 0; n < tree.size(); ++n)
        SSD_CHECK(tree.depth(static_cast<int32_t>(n)) <= depth[a],
                  "drafter {} returned a node at depth {} beyond k = {}", drafter.name(),
                  tree.depth(static_cast<int32_t>(n)), depth[a]);
      VerifyInput& in = inputs[a];
      in.kv_seq = seqs[i].kv;
      in.root = seqs[i].root;
      in.root_pos = seqs[i].root_pos;
      in.tree = &tree;
      in.sampler = reqs[i].sampler;
      in.stream = reqs[i].stream;
      in.step = static_cast<uint32_t>(out.requests[i].gen.tokens.size());
    }

    const double tv = monotonic_seconds();
    const VerifyRoundResult round =
        verify_round(target, inputs, layers, drafter.observes_target_logits());
    const double verify_dt = monotonic_seconds() - tv;
    int64_t rows = 0;
    for (const DraftTree& t : trees) rows += 1 + static_cast<int64_t>(t.size());
    length.observe_verify(rows, verify_dt);
    out.stats.verify_s += verify_dt;
    out.stats.target_forward_s += round.forward_s;
    out.stats.forwards++;

    for (size_t a = 0; a < active.size(); ++a) {
      const size_t i = active[a];
      SdSeq& s = seqs[i];
      SdResult& r = out.requests[i];
      const VerifyResult& v = round.seqs[a].result;
      r.stats.verify_s += verify_dt;
      r.stats.target_forward_s += round.forward_s;
      r.stats.forwards++;
      r.gen.forwards++;
      count_round(r.stats, trees[a], v, opts.k, depth[a]);
      count_round(out.stats, trees[a], v, opts.k, depth[a]);
      length.observe_outcome(static_cast<int32_t>(i), max_depth(trees[a]), v.accepted());

      // Emit accepted tokens and the correction/bonus, stopping early at EOG or the budget.
      std::vector<int32_t> emitted;
      for (int32_t tok : v.emitted) {
        emitted.push_back(tok);
        s.running = emit(i, tok);
        if (!s.running) break;
      }
      td = monotonic_seconds();
      const int32_t dseq = static_cast<int32_t>(i);
      drafter.observe(DraftOutcome{dseq, &trees[a], v.path, v.emitted, round.logits(a), vocab});
      drafter.commit(dseq, emitted);
      if (!layers.empty()) drafter.set_features(dseq, s.root_pos, round.seqs[a].features);
      drafter_time(i, td);
      s.root = v.emitted.back();
      s.root_pos += 1 + v.accepted();
      if (!s.running) leave(i);
    }
  }
  return out;
}

SdResult generate_sd(TargetModel& target, Drafter& drafter, const GenerationRequest& req,
                     const SdOptions& opts, const TokenCallback& on_token) {
  BatchTokenCallback cb;
  if (on_token) cb = [&](size_t, int32_t tok) { return on_token(tok); };
  return std::move(generate_sd_batch(target, drafter, {&req, 1}, opts, cb).requests.front());
}

}  // namespace ssd
