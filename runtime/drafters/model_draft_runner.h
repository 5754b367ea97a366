// Autoregressive drafting with a transformer over its own KV cache: the machinery the model
// drafter (an independent small model), the oracle drafter (the target's own weights) and the
// early-exit drafter (the target's first L blocks + a LoRA head) share. What token each draft
// position gets is the DraftPolicy's business; this class keeps the cache in step with the
// committed sequence and runs the batched forwards. A policy with its own head (early exit) asks
// for the last block's hidden state of each drafted row and rewrites the logits rows from it in
// DraftPolicy::prepare() before it picks.
//
// KV bookkeeping, per sequence (context = every committed token, n of them):
//   - commit() only appends to the context; the forwards happen lazily at the next draft().
//   - Between calls the committed cache holds context[0, n-1): the last committed token is held
//     back so that every draft has at least one token to forward for its first logits, even when
//     nothing was committed since the previous draft (SSD asks many times per round).
//   - A draft writes context[cached, n) + suffix + its draft tokens. The first request of a
//     sequence in a call works on the committed cache itself and truncates it back to n - 1 at
//     the end (the catch-up rows it wrote stay); further requests on the same sequence (Saguaro's
//     hypothetical outcomes) work on forks (KvCache::fork shares pages, copy on write), as do the
//     first-level siblings of a tree (forked after the suffix is in), all released at the end.
//     So a rejected draft costs nothing to undo.
// Batching: every request's rows go into ONE forward per drafting step: step 0 forwards each
// request's catch-up + last token + suffix, step d (1 <= d < k) the depth-d token of every
// branch of every request. Long catch-ups (> prefill_chunk, e.g. the prompt at the first draft)
// are forwarded first in chunks.
//
// Context limit: only positions below the model's context length C are ever forwarded. A draft
// of depth k after n + |suffix| tokens forwards positions up to n + |suffix| + k - 2, so k is
// clipped to C - n - |suffix| + 1, and once that is <= 0 the tree is empty: drafting stops
// gracefully and the SD loop decodes one token per round, as AR. The cache capacity (kv_tokens
// over all sequences) is a hard limit: a full cache is an ssd::Error from the KV cache.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "runtime/kv/kv_cache.h"
#include "runtime/model/transformer.h"
#include "runtime/spec/drafter.h"

namespace ssd {

// One drafted token and the exact distribution it was drawn from; `predicted` is what the node
// reports as DraftTree::predicted when the request asks (DraftRequest::predict_top, see
// runtime/saguaro/saguaro_sampling.h), and is ignored otherwise.
struct DraftPick {
  int32_t token = 0;
  ProcessedDist q;
  ProcessedDist predicted;
};

// Chooses the draft tokens from the runner model's logits. `logits` is one row [vocab].
class DraftPolicy {
 public:
  virtual ~DraftPolicy() = default;
  // Whether prepare() gets the hidden states (the runner model's last block output, before the
  // output norm) of the drafted rows.
  virtual bool wants_hidden() const { return false; }
  // Called after every drafting forward, before that forward's first()/next() calls, which then
  // come in row order: hidden [m, dim] (empty unless wants_hidden()) and logits [m, vocab] of the
  // m drafted rows. A policy with its own head may rewrite the logits in place.
  virtual void prepare(std::span<const float> hidden, std::span<float> logits, int64_t m) {
    (void)hidden, (void)logits, (void)m;
  }
  // The first-level siblings (depth 1), at most `width`, distinct, in verification order.
  virtual std::vector<DraftPick> first(const float* logits, int32_t vocab, const DraftRequest& r,
                                       int32_t width) = 0;
  // The token at depth `depth` (>= 2) of branch `branch` (the branch of sibling `branch`).
  virtual DraftPick next(const float* logits, int32_t vocab, const DraftRequest& r, int32_t branch,
                         int32_t depth) = 0;
};

// Siblings drawn without replacement from q: sibling j is drawn from q with siblings 0..j-1
// removed and renormalised, and carries that renormalised distribution (what verify.h needs).
// u(j) gives sibling j's uniform. Stops early when q's support runs out.
template <typename Uniform>
std::vector<DraftPick> draw_without_replacement(const ProcessedDist& q, int32_t width, Uniform u);
// The renormalised q minus `removed` (empty when nothing is left).
ProcessedDist without_tokens(const ProcessedDist& q, std::span<const int32_t> removed);

class ModelDraftRunner {
 public:
  // `model` must outlive the runner. kv_tokens: cache capacity over all sequences (0 = the
  // model's context length + 1024). `who` names the drafter in error messages.
  ModelDraftRunner(Transformer& model, int64_t kv_tokens, int64_t prefill_chunk, std::string who);
  ModelDraftRunner(const ModelDraftRunner&) = delete;
  ModelDraftRunner& operator=(const ModelDraftRunner&) = delete;
  ~ModelDraftRunner();

  void start(int32_t seq, std::span<const int32_t> prompt);
  void commit(int32_t seq, std::span<const int32_t> tokens);
  void finish(int32_t seq);
  std::vector<DraftTree> draft(std::span<const DraftRequest> requests, DraftPolicy& policy);

  Transformer& model() { return model_; }
  const KvCache& kv() const { return kv_; }
  KvCache& kv() { return kv_; }  // e.g. for a scratch sequence between calls
  // Every committed token of `seq`.
  const std::vector<int32_t>& context(int32_t seq) const;
  int64_t context_limit() const { return context_limit_; }
  // Committed positions cached for `seq` (n - 1 after a draft, see the top of the file).
  int64_t cached(int32_t seq) const;

 private:
  struct SeqState {
    std::vector<int32_t> context;  // every committed token
    SeqId kv = -1;
    int64_t cached = 0;  // context[0, cached) have K/V in kv
  };
  SeqState& state(int32_t seq);
  void catch_up(SeqState& s, int64_t upto);
  ForwardResult forward(const Batch& b);  // errors prefixed with who_
  // A drafting forward of `b` (its logits rows are the drafted rows), then policy.prepare().
  ForwardResult step(Batch& b, DraftPolicy& policy);

  Transformer& model_;
  KvCache kv_;
  int64_t prefill_chunk_;
  int64_t context_limit_;
  std::string who_;
  std::map<int32_t, SeqState> seqs_;
};

// ---- template implementation ----

template <typename Uniform>
std::vector<DraftPick> draw_without_replacement(const ProcessedDist& q, int32_t width, Uniform u) {
  std::vector<DraftPick> out;
  std::vector<int32_t> taken;
  ProcessedDist cur = q;
  for (int32_t j = 0; j < width && !cur.tokens.empty(); ++j) {
    const int32_t tok = sample(cur, u(j));
    out.push_back(DraftPick{tok, cur, {}});
    taken.push_back(tok);
    if (j + 1 < width) cur = without_tokens(q, taken);
  }
  return out;
}

}  // namespace ssd
