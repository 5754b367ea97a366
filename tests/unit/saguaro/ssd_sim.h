// An in-process SSD loop for the tests: the target Transformer verifies each sequence's
// speculation (one tree forward per sequence, verify_greedy / verify_sampling, KV compaction as in
// sd_generation.cpp) and SsdDrafterCore answers each round's outcomes and pre-speculates for the
// next, in sequence (no overlap: the point is the state machine and exactness, not the timing).
// Greedy AR output per prompt is computed by a plain argmax loop over the same target.
#pragma once

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <span>
#include <vector>

#include "runtime/kv/kv_cache.h"
#include "runtime/model/transformer.h"
#include "runtime/saguaro/ssd_drafter_core.h"
#include "runtime/spec/verify.h"

namespace ssd::test::saguaro {

inline std::vector<int32_t> greedy_ar(Transformer& target, KvCache& kv,
                                      const std::vector<int32_t>& prompt, int64_t n) {
  const SeqId s = kv.create();
  const int32_t vocab = static_cast<int32_t>(target.config().vocab);
  ForwardResult fr = target.forward(Batch::sequence(s, prompt, 0), kv);
  std::vector<int32_t> out;
  while (static_cast<int64_t>(out.size()) < n) {
    out.push_back(argmax(fr.logits_row(0), vocab));
    if (static_cast<int64_t>(out.size()) == n) break;
    fr = target.forward(Batch::sequence(s, {out.back()}, static_cast<int32_t>(kv.length(s))), kv);
  }
  kv.release(s);
  return out;
}

// Root (the last emitted token, not yet cached) at root_pos, then the chain; causal within.
inline Batch chain_batch(SeqId seq, int32_t root, int32_t root_pos, const DraftTree& t) {
  std::vector<int32_t> toks{root};
  toks.insert(toks.end(), t.tokens.begin(), t.tokens.end());
  return Batch::sequence(seq, toks, root_pos, /*all_logits=*/true);
}

struct SimOptions {
  int64_t n_new = 40;
  SamplerConfig sampler;       // temperature 0 = greedy
  bool report_verify = false;  // tell the miss policy the verification times
  bool pass_logits = false;    // RoundOutcome::target_logits (observe())
  // Secondary drafter ranks: called with each round's outcomes (empty at round 0) and the lead's
  // answers; and, when set, the pre-speculation instead of core.prespeculate().
  std::function<void(std::span<const RoundOutcome>, std::span<const Speculation>)> mirror;
  std::function<void(SsdDrafterCore&)> prespeculate;
  // When set: the length of each sequence's next speculation (RoundOutcome::next_k; round 0 is
  // round index 0), as the target leader sends it under --k auto.
  std::function<int32_t(int32_t seq, int64_t round)> next_k;
};

inline double seconds_now() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

struct SimResult {
  std::vector<std::vector<int32_t>> outputs;  // [prompts] generated tokens
  int64_t rounds = 0;                         // target verification forwards
};

inline SimResult run_ssd(Transformer& target, KvCache& kv, SsdDrafterCore& core,
                         const std::vector<std::vector<int32_t>>& prompts, const SimOptions& o) {
  const int32_t vocab = static_cast<int32_t>(target.config().vocab);
  const Sampler sampler(o.sampler);
  SimResult res;
  const size_t n = prompts.size();
  res.outputs.resize(n);
  std::vector<SeqId> kvs(n);
  std::vector<int32_t> active;
  for (size_t i = 0; i < n; ++i) {
    kvs[i] = kv.create();
    ForwardResult fr = target.forward(Batch::sequence(kvs[i], prompts[i], 0), kv);
    const int32_t first = sampler.sample(fr.logits_row(0), vocab, i, 0);
    res.outputs[i].push_back(first);
    core.start(static_cast<int32_t>(i), prompts[i], res.outputs[i], i);
    if (o.n_new > 1) active.push_back(static_cast<int32_t>(i));
  }
  auto prespeculate = [&] {
    if (o.prespeculate)
      o.prespeculate(core);
    else
      core.prespeculate();
  };
  std::map<int32_t, Speculation> specs;
  {
    std::vector<int32_t> ks;
    for (int32_t seq : active)
      if (o.next_k) ks.push_back(o.next_k(seq, 0));
    const std::vector<Speculation> first = core.first_speculations(active, ks);
    if (o.mirror) o.mirror({}, first);
    for (const Speculation& s : first) specs[s.seq] = s;
  }
  prespeculate();
  while (!active.empty()) {
    std::vector<RoundOutcome> outcomes;
    std::vector<std::vector<float>> logits(n);
    std::vector<int32_t> still;
    const double t0 = seconds_now();
    for (int32_t seq : active) {
      std::vector<int32_t>& out = res.outputs[seq];
      const int64_t remaining = o.n_new - static_cast<int64_t>(out.size());
      DraftTree tree = specs.at(seq).tree();
      const size_t keep_nodes = static_cast<size_t>(std::max<int64_t>(0, remaining - 1));
      if (tree.size() > keep_nodes) {  // cutting a chain keeps every kept node's q: still exact
        tree.tokens.resize(keep_nodes);
        tree.parents.resize(keep_nodes);
        tree.q.resize(keep_nodes);
      }
      const int32_t root_pos = static_cast<int32_t>(kv.length(kvs[seq]));
      ForwardResult fr = target.forward(chain_batch(kvs[seq], out.back(), root_pos, tree), kv);
      const VerifyResult v =
          is_greedy(o.sampler)
              ? verify_greedy(tree, fr.logits.data(), vocab)
              : verify_sampling(tree, fr.logits.data(), vocab, o.sampler,
                                VerifyRng{o.sampler.seed, static_cast<uint64_t>(seq),
                                          static_cast<uint32_t>(out.size())});
      std::vector<int32_t> keep{0};
      for (int32_t node : v.path) keep.push_back(1 + node);
      kv.compact(kvs[seq], root_pos, keep);
      res.rounds++;
      for (int32_t tok : v.emitted)
        if (static_cast<int64_t>(out.size()) < o.n_new) out.push_back(tok);
      if (static_cast<int64_t>(out.size()) >= o.n_new) {
        core.finish(seq);
        continue;
      }
      RoundOutcome r{seq, v.accepted(), v.emitted};
      if (o.next_k) r.next_k = o.next_k(seq, res.rounds);
      if (o.pass_logits) {
        logits[seq] = std::move(fr.logits);
        r.target_logits = logits[seq].data();
        r.vocab = vocab;
      }
      outcomes.push_back(std::move(r));
      still.push_back(seq);
    }
    if (o.report_verify && !active.empty())
      core.miss_policy().observe_verify(static_cast<int32_t>(active.size()), seconds_now() - t0);
    active = still;
    if (active.empty()) break;
    const std::vector<Speculation> next = core.on_outcome(outcomes);
    if (o.mirror) o.mirror(outcomes, next);
    for (const Speculation& s : next) specs[s.seq] = s;
    prespeculate();
  }
  for (SeqId s : kvs) kv.release(s);
  return res;
}

}  // namespace ssd::test::saguaro
