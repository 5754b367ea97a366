// `--drafter early-exit:L` (self-speculation as in "Draft, Verify, and Improve: Toward
// Training-Aware Speculative Decoding"): the target's own first L blocks
// (a second Transformer over the same ModelFile, sharing its mapped weights, with its own KV
// cache) and a draft head on block L's output h:
//   z = RMSNorm_final(h)             the target's output norm
//   logits = LMHead(z) + s B (A z)   LoRA update, B zero-initialised (lora_head.h)
// Untrained, the head is exactly the target's LM head read out at layer L.
//
// Drafting: a chain of k tokens per request, autoregressively (width > 1 is ignored: one chain).
//   greedy (temperature 0): argmax, q = one_hot;
//   sampling: q = process(logits, request sampler), the token drawn from q by inverse CDF with
//     Philox (seed, stream, position + depth - 1, kLaneEarlyExitDraft); with Saguaro sampling
//     (DraftRequest::saguaro_*) the token is drawn from the reshaped q (saguaro_sampling.h) and
//     the node carries it. DVI's logged log q stays the head's own temperature-1 log-probability.
// The KV bookkeeping and batching are ModelDraftRunner's (model_draft_runner.h: one forward per
// draft step for all requests, lazy catch-up, forks, context clipping); the head is a DraftPolicy
// that asks the runner for block L's hidden state of each drafted row and rewrites its logits.
//
// Online learning (`--online-learning`, DVI): draft() keeps, per drafted position, z, the frozen
// logits W z, the token, log q(token) and the previous token; observe() turns the verifier's
// decision into one tuple per position up to and including the first reject (reward 1 / 0), adds
// the target's distribution from the outcome's logits row of the node's parent, and hands it to
// the DviTrainer (dvi_trainer.h), which updates A and B. Time spent is in trainer()->stats().
#pragma once

#include <map>
#include <memory>

#include "runtime/backend/backend.h"
#include "runtime/drafters/acceptance_curve.h"
#include "runtime/drafters/dvi_trainer.h"
#include "runtime/drafters/lora_head.h"
#include "runtime/drafters/model_draft_runner.h"
#include "runtime/model/model_file.h"
#include "runtime/model/transformer.h"
#include "runtime/spec/drafter.h"

namespace ssd {

struct EarlyExitOptions {
  int64_t layers = 8;            // L: target blocks the drafter runs (1..n_layers)
  LoraOptions lora;
  bool online_learning = false;  // DVI
  DviOptions dvi;
  int64_t kv_tokens = 0;         // drafter KV capacity over all sequences; 0 = context + 1024
  int64_t prefill_chunk = 256;   // catch-up tokens per forward when the backlog is long
};

class EarlyExitDrafter final : public Drafter {
 public:
  // `target` is the target's opened model file and `backend` its backend; both must outlive the
  // drafter (calls are sequential, so sharing the backend is safe). Throws ssd::Error when L is
  // outside 1..n_layers or an option is out of range.
  EarlyExitDrafter(const ModelFile& target, Backend& backend, const EarlyExitOptions& opts);
  ~EarlyExitDrafter() override;

  std::string name() const override;  // "early-exit:L" (+ "+dvi" with online learning)
  void start(int32_t seq, std::span<const int32_t> prompt) override;
  void commit(int32_t seq, std::span<const int32_t> tokens) override;
  std::vector<DraftTree> draft(std::span<const DraftRequest> requests) override;
  void observe(const DraftOutcome& outcome) override;
  bool observes_target_logits() const override { return true; }
  void finish(int32_t seq) override;

  // The head on hidden states h [n, dim] (block L's output): logits [n, vocab].
  std::vector<float> head_logits(std::span<const float> h, int64_t n);
  // Block L's output hidden states of `tokens` (positions 0..) on a scratch sequence: [n, dim].
  std::vector<float> hidden_of(std::span<const int32_t> tokens);

  int64_t layers() const { return model_->layers(); }
  const LoraHead& head() const { return head_; }
  LoraHead& head() { return head_; }
  const DviTrainer* trainer() const { return trainer_.get(); }
  // One record per observe() (every drafter round), learning or not.
  const std::vector<RoundRecord>& rounds() const { return rounds_; }

 private:
  // What a draft leaves for observe() to learn from: per drafted position (depth order).
  struct PendingDraft {
    std::vector<int32_t> tokens;  // [k]
    std::vector<int32_t> prev;    // [k] the token before each
    std::vector<float> z;         // [k, dim]
    std::vector<float> base;      // [k, vocab] W z
    std::vector<float> logq;      // [k] log q(token) under the head that drafted it
  };
  class HeadPolicy;

  // z = RMSNorm_final(h) for rows [n, dim], in place.
  void normalise(float* h, int64_t n);

  EarlyExitOptions opts_;
  const ModelConfig& cfg_;
  std::unique_ptr<Transformer> model_;
  std::unique_ptr<ModelDraftRunner> runner_;  // over model_
  LoraHead head_;
  std::unique_ptr<DviTrainer> trainer_;
  std::map<int32_t, std::vector<PendingDraft>> pending_;  // seq -> drafts of the last call
  std::vector<RoundRecord> rounds_;
};

}  // namespace ssd
