// `--drafter model:PATH`: an independent small model with the target's tokenizer drafts K tokens
// autoregressively, with its own Transformer and KV cache kept in step with the accepted sequence
// (see model_draft_runner.h for the lazy catch-up, the forks and the context limit).
//
// Token choice at every draft position, from the draft model's logits l:
//   sampling (temperature > 0): q = process(l, the request's SamplerConfig), the very pipeline the
//     target's p goes through, and the token is drawn from q by inverse CDF with the Philox
//     uniform (seed, stream, position of the token, kLaneDrafter + branch). First-level siblings
//     (width > 1) are drawn without replacement from q, each carrying the renormalised q it was
//     drawn from; each sibling is then continued as a chain.
//   greedy (temperature 0): the argmax, q = one_hot. Siblings are the draft's top-`width` tokens
//     (one-hot each): greedy verification reads no q, and drawing "without replacement" from a
//     one-hot would leave nothing to offer.
//   Saguaro (DraftRequest::saguaro_top_f / saguaro_c, sampling only): q is reshaped by
//     runtime/saguaro/saguaro_sampling.h before the draw and the node carries the reshaped q;
//     DraftRequest::predict_top fills DraftTree::predicted from the q before the reshape.
// The draft model's logits width and vocabulary (a fingerprint of the token texts) must equal the
// target's: a mismatch is an ssd::Error naming both files, at construction.
//
//   ModelFile f = ModelFile::open(path);
//   ModelDrafterOptions o;
//   o.target_vocab = VocabFingerprint::of(target_path, target_tokenizer.spec().tokens);
//   o.draft_vocab = VocabFingerprint::of(f.path(), load_tokenizer(f).spec().tokens);
//   o.target_logits = target.config().vocab;
//   o.kv_tokens = session_ctx;
//   auto d = std::make_unique<ModelDrafter>(std::move(f), target_backend, o);
#pragma once

#include <memory>

#include "runtime/backend/backend.h"
#include "runtime/drafters/model_draft_runner.h"
#include "runtime/drafters/vocab_fingerprint.h"
#include "runtime/model/model_file.h"
#include "runtime/spec/drafter.h"

namespace ssd {

struct ModelDrafterOptions {
  VocabFingerprint target_vocab;  // the target's tokenizer (source: the target's path); required
  VocabFingerprint draft_vocab;   // the draft model's tokenizer (source: its path); required
  int64_t target_logits = 0;      // the target's ModelConfig::vocab (width of its logits rows)
  int64_t kv_tokens = 0;          // draft KV capacity over all sequences; 0 = its context + 1024
  int64_t prefill_chunk = 256;    // catch-up tokens per forward when the backlog is long
};

class ModelDrafter final : public Drafter {
 public:
  // Takes the opened draft model (ModelFile::open of a GGUF file or HF checkpoint). `backend`
  // must outlive the drafter (the target's backend may be shared: calls are sequential).
  ModelDrafter(ModelFile draft, Backend& backend, const ModelDrafterOptions& opts);

  std::string name() const override;  // "model:<path>"
  void start(int32_t seq, std::span<const int32_t> prompt) override;
  void commit(int32_t seq, std::span<const int32_t> tokens) override;
  std::vector<DraftTree> draft(std::span<const DraftRequest> requests) override;
  void finish(int32_t seq) override;
  // Its model's tree decode (drafter_warmup_sizes) on its own cache.
  std::vector<WarmupSite> warmup_sites(const WarmupPlan& plan) override;

  const ModelFile& file() const { return *file_; }
  const ModelDraftRunner& runner() const { return *runner_; }

 private:
  std::unique_ptr<ModelFile> file_;  // heap: the transformer points into it
  std::unique_ptr<Transformer> model_;
  std::unique_ptr<ModelDraftRunner> runner_;
  int64_t prefill_chunk_ = 0;  // its largest forward (catch-up chunks)
};

}  // namespace ssd
