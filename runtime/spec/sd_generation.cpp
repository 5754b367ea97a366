#include "runtime/spec/sd_generation.h"

#include <algorithm>
#include <chrono>

#include "runtime/core/error.h"
#include "runtime/spec/verify.h"

namespace ssd {
namespace {

// Batch of the root (already emitted, not yet in the cache) and the draft tree: node i at row
// 1 + i, position root_pos + depth(i), seeing the root, its ancestors and itself.
Batch tree_batch(SeqId seq, int32_t root, int32_t root_pos, const DraftTree& t,
                 const std::vector<int32_t>& feature_layers) {
  const int32_t n = static_cast<int32_t>(t.size()) + 1;
  Batch b;
  b.tokens.push_back(root);
  b.positions.push_back(root_pos);
  for (size_t i = 0; i < t.size(); ++i) {
    b.tokens.push_back(t.tokens[i]);
    b.positions.push_back(root_pos + t.depth(static_cast<int32_t>(i)));
  }
  b.seqs.assign(n, seq);
  b.mask.assign(static_cast<size_t>(n) * n, 0);
  for (int32_t r = 0; r < n; ++r) {
    b.mask[r * n + 0] = 1;
    for (int32_t node = r - 1; node >= 0; node = t.parents[node]) b.mask[r * n + 1 + node] = 1;
    b.logits_rows.push_back(r);
  }
  b.hidden_layers = feature_layers;
  return b;
}

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

SdResult generate_sd(Transformer& target, KvCache& kv, Drafter& drafter,
                     const GenerationRequest& req, const SdOptions& opts,
                     const TokenCallback& on_token) {
  SSD_CHECK(opts.k >= 1 && opts.k <= 32, "--k {} must be between 1 and 32", opts.k);
  SSD_CHECK(opts.width >= 1 && opts.width <= 16, "--width {} must be between 1 and 16", opts.width);
  GenerationRequest padded = req;  // the verification forward writes up to K positions ahead
  padded.max_new_tokens += opts.k;
  check_context(target, kv, padded);

  const int32_t vocab = static_cast<int32_t>(target.config().vocab);
  const std::vector<int32_t> layers = drafter.target_feature_layers();
  for (int32_t l : layers)
    SSD_CHECK(l >= 0 && l < target.config().n_layers,
              "drafter {} asks for target layer {}, but the target has layers 0..{}",
              drafter.name(), l, target.config().n_layers - 1);
  Sampler sampler(req.sampler);
  SdResult res;
  GenerationResult& g = res.gen;
  SdStats& st = res.stats;
  st.accept_hist.assign(opts.k + 1, 0);
  st.pos_accepted.assign(opts.k, 0);
  st.pos_offered.assign(opts.k, 0);
  g.prompt_tokens = static_cast<int64_t>(req.prompt.size());
  SeqGuard seq{kv, kv.create()};
  const int32_t dseq = 0;

  // Prefill exactly as AR does, collecting the drafter's features of the prompt.
  PrefillResult pre = prefill(target, kv, seq.id, req.prompt, req.prefill_chunk, layers);
  ForwardResult fr = std::move(pre.last);
  const std::vector<float>& prompt_features = pre.features;
  g.prefill_s = pre.seconds;

  const double t1 = monotonic_seconds();
  double td = monotonic_seconds();
  drafter.start(dseq, req.prompt);
  if (!layers.empty()) drafter.set_features(dseq, 0, prompt_features);
  st.draft_s += monotonic_seconds() - td;

  // Emits one token: streams it, checks stop conditions. Returns false when generation ends.
  auto emit = [&](int32_t tok) {
    g.tokens.push_back(tok);
    const bool stop = std::find(req.stop_ids.begin(), req.stop_ids.end(), tok) != req.stop_ids.end();
    if (on_token && !on_token(tok)) return false;
    if (stop) {
      g.stopped_by_eog = true;
      return false;
    }
    return static_cast<int64_t>(g.tokens.size()) < req.max_new_tokens;
  };

  if (req.max_new_tokens == 0) return res;
  // The first token comes from the prefill's logits, as in AR.
  int32_t root = sampler.sample(fr.logits_row(0), vocab, req.stream, 0);
  bool running = emit(root);
  td = monotonic_seconds();
  drafter.commit(dseq, {&root, 1});
  st.draft_s += monotonic_seconds() - td;

  while (running) {
    const int32_t root_pos = static_cast<int32_t>(kv.length(seq.id));
    const int64_t remaining = req.max_new_tokens - static_cast<int64_t>(g.tokens.size());
    DraftRequest dr;
    dr.seq = dseq;
    dr.k = static_cast<int32_t>(std::min<int64_t>(opts.k, remaining - 1));
    dr.width = opts.width;
    dr.sampler = req.sampler;
    dr.stream = req.stream;
    dr.position = static_cast<uint32_t>(g.tokens.size());
    DraftTree tree;
    td = monotonic_seconds();
    if (dr.k > 0) tree = std::move(drafter.draft({&dr, 1}).at(0));
    st.draft_s += monotonic_seconds() - td;
    tree.validate(vocab);
    // Keep only nodes within depth k (a drafter may not exceed the request).
    for (size_t i = 0; i < tree.size(); ++i)
      SSD_CHECK(tree.depth(static_cast<int32_t>(i)) <= std::max(dr.k, 0),
                "drafter {} returned a node at depth {} beyond k = {}", drafter.name(),
                tree.depth(static_cast<int32_t>(i)), dr.k);

    const double tv = monotonic_seconds();
    fr = target.forward(tree_batch(seq.id, root, root_pos, tree, layers), kv);
    const VerifyResult v =
        is_greedy(req.sampler)
            ? verify_greedy(tree, fr.logits.data(), vocab)
            : verify_sampling(tree, fr.logits.data(), vocab, req.sampler,
                              VerifyRng{req.sampler.seed, req.stream,
                                        static_cast<uint32_t>(g.tokens.size())});
    // Keep root + accepted path in the cache; drop the rejected branches.
    std::vector<int32_t> keep{0};
    for (int32_t node : v.path) keep.push_back(1 + node);
    kv.compact(seq.id, root_pos, keep);
    st.verify_s += monotonic_seconds() - tv;

    st.rounds++;
    g.forwards++;
    st.accepted += v.accepted();
    st.drafted += static_cast<int64_t>(tree.size());
    st.accept_hist[std::min<int32_t>(v.accepted(), opts.k)]++;
    int32_t max_depth = 0;
    for (size_t i = 0; i < tree.size(); ++i) max_depth = std::max(max_depth, tree.depth(static_cast<int32_t>(i)));
    for (int32_t j = 0; j < max_depth; ++j) st.pos_offered[j]++;
    for (int32_t j = 0; j < v.accepted(); ++j) st.pos_accepted[j]++;

    // Emit accepted tokens and the correction/bonus, stopping early at EOG or the budget.
    std::vector<int32_t> emitted;
    for (int32_t tok : v.emitted) {
      emitted.push_back(tok);
      running = emit(tok);
      if (!running) break;
    }
    td = monotonic_seconds();
    DraftOutcome outcome{dseq, &tree, v.path, v.emitted, fr.logits.data(), vocab};
    drafter.observe(outcome);
    drafter.commit(dseq, emitted);
    if (!layers.empty()) drafter.set_features(dseq, root_pos, gather_features(fr, keep));
    st.draft_s += monotonic_seconds() - td;
    root = v.emitted.back();
  }
  g.decode_s = monotonic_seconds() - t1;
  td = monotonic_seconds();
  drafter.finish(dseq);
  st.draft_s += monotonic_seconds() - td;
  return res;
}

}  // namespace ssd
