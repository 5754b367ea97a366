// The drafter interface every kind implements (n-gram lookup, an independent draft model,
// early-exit self-speculation with a DVI-trained head, Domino block drafting, and the research
// oracle). A drafter keeps, per sequence, the committed context (every token emitted so far) and
// whatever state it derives from it (its own KV cache, target features); it proposes draft trees
// for many requests per call, so a batch of sequences, or many hypothetical continuations of one
// sequence (Saguaro's pre-speculation branches), cost one batched forward.
//
// Protocol for one sequence (context = every token emitted so far, prompt included):
//   start(seq, prompt)                 once, with the prompt tokens
//   commit(seq, tokens)                append emitted tokens to the context
//   set_features(seq, from, features)  the target's hidden states (at target_feature_layers())
//                                      of context positions [from, from + n); they lag the tokens:
//                                      the last emitted token has not been through the target yet
//   draft({seq, suffix, k, ...})       propose a tree continuing context + suffix (the suffix is
//                                      hypothetical, e.g. a predicted verification outcome;
//                                      nothing is committed)
//   observe(outcome)                   the verifier's decision on a draft (online-learning
//                                      drafters learn from it; others ignore it)
//   finish(seq)                        release the sequence's state
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "runtime/model/forward_warmup.h"
#include "runtime/sampling/sampler.h"
#include "runtime/spec/draft_tree.h"

namespace ssd {

struct DraftRequest {
  int32_t seq = 0;
  std::vector<int32_t> suffix;  // hypothetical tokens after the committed context (may be empty)
  int32_t k = 4;                // depth: tokens per branch
  int32_t width = 1;            // branches at the first level (1 = a chain); drafters may ignore
  SamplerConfig sampler;        // q is processed with these settings; temperature 0 = greedy
  uint64_t stream = 0;          // Philox stream/position for the drafter's own draws
  uint32_t position = 0;
  // Saguaro sampling (runtime/saguaro/saguaro_sampling.h), for drafters that sample (temperature
  // > 0; greedy drafts are argmaxes and ignore it): the token at depth d is drawn from q with its
  // top saguaro_top_f[d - 1] probabilities multiplied by saguaro_c and renormalised, and the
  // node carries that reshaped q. Off when saguaro_c == 1, for depths past the list's end and
  // where the list holds 0.
  std::vector<int32_t> saguaro_top_f;  // [depth] F of the draft position at each depth
  double saguaro_c = 1.0;              // in (0, 1]
  // > 0: each node also reports the drafter's predict_top likeliest tokens at its position, before
  // any Saguaro reshape (DraftTree::predicted), for Saguaro's outcome prediction. Drafters that
  // cannot rank alternatives leave DraftTree::predicted empty.
  int32_t predict_top = 0;
};

// The verifier's decision on a draft, with the target's distributions that judged it.
struct DraftOutcome {
  int32_t seq = 0;
  const DraftTree* tree = nullptr;
  std::vector<int32_t> path;        // accepted nodes
  std::vector<int32_t> emitted;     // accepted tokens + correction/bonus
  const float* target_logits = nullptr;  // [tree->size() + 1, vocab], rows as in verify.h
  int32_t vocab = 0;
};

class Drafter {
 public:
  virtual ~Drafter() = default;
  virtual std::string name() const = 0;
  // Target layers whose hidden states commit() must receive (empty: none).
  virtual std::vector<int32_t> target_feature_layers() const { return {}; }
  // Floats per row of set_features (layers x the target's hidden size); 0 when it takes none.
  virtual int64_t target_feature_dim() const { return 0; }

  virtual void start(int32_t seq, std::span<const int32_t> prompt) = 0;
  virtual void commit(int32_t seq, std::span<const int32_t> tokens) = 0;
  // features: [n, layers x dim] row-major, layer blocks in target_feature_layers() order.
  virtual void set_features(int32_t seq, int64_t from, std::span<const float> features) {}
  virtual std::vector<DraftTree> draft(std::span<const DraftRequest> requests) = 0;
  virtual void observe(const DraftOutcome& outcome) {}
  // True when observe() reads DraftOutcome::target_logits. The loops bring a round's logits to
  // the host only for such a drafter (a device target leaves them on the device, and the
  // outcome's target_logits is then null).
  virtual bool observes_target_logits() const { return false; }
  // The models and caches whose forwards this drafter repeats, with the sizes a run of `plan`
  // repeats, for the start-up warm-up on a backend that replays forwards
  // (runtime/model/forward_warmup.h). None by default.
  virtual std::vector<WarmupSite> warmup_sites(const WarmupPlan& plan) {
    (void)plan;
    return {};
  }
  virtual void finish(int32_t seq) = 0;
  // True when a draft costs next to nothing beside a target forward (a lookup, no model): under
  // --k auto the loop then drafts the whole range first and chooses each length among the
  // tokens offered, instead of asking for the chosen length.
  virtual bool drafts_cheaply() const { return false; }
  // Which memory the sequences started from now on share. A drafter that remembers earlier
  // requests (suffix) lets a request inform only later requests of the same scope, so a benchmark
  // that runs the same prompts under several configurations gives each its own memory. Scope 0
  // is the default; drafters without such memory ignore it.
  virtual void set_memory_scope(uint64_t scope) { (void)scope; }
};

}  // namespace ssd
