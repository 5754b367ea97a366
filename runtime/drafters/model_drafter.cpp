#include "runtime/drafters/model_drafter.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "runtime/core/error.h"
#include "runtime/saguaro/saguaro_sampling.h"

namespace ssd {
namespace {

// The `width` largest logits, largest first, ties to the lower id (argmax's rule); NaN never
// chosen. logits: [vocab].
std::vector<int32_t> top_tokens(const float* logits, int32_t vocab, int32_t width) {
  std::vector<int32_t> ids;
  ids.reserve(vocab);
  for (int32_t i = 0; i < vocab; ++i)
    if (!std::isnan(logits[i])) ids.push_back(i);
  const size_t w = std::min<size_t>(width, ids.size());
  std::partial_sort(ids.begin(), ids.begin() + w, ids.end(), [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  ids.resize(w);
  return ids;
}

// The policy of the file comment: process() + Philox draw, or argmax / top-width when greedy;
// Saguaro sampling and the predicted alternatives as the request asks (saguaro_sampling.h).
class SampledPolicy final : public DraftPolicy {
 public:
  std::vector<DraftPick> first(const float* logits, int32_t vocab, const DraftRequest& r,
                               int32_t width) override {
    if (is_greedy(r.sampler)) {
      const ProcessedDist predicted = predicted_for(r, logits, vocab, {});
      std::vector<DraftPick> out;
      for (int32_t t : top_tokens(logits, vocab, width))
        out.push_back(DraftPick{t, one_hot(t), predicted});
      SSD_CHECK(!out.empty(), "model drafter: every draft logit is NaN");
      return out;
    }
    ProcessedDist q = process(logits, vocab, r.sampler);
    const ProcessedDist predicted = predicted_for(r, logits, vocab, q);
    apply_saguaro(r, 1, q);
    std::vector<DraftPick> out = draw_without_replacement(q, width, [&](int32_t j) {
      return philox_uniform(r.sampler.seed, r.stream, r.position, kLaneDrafter + j);
    });
    for (DraftPick& p : out) p.predicted = predicted;
    return out;
  }

  DraftPick next(const float* logits, int32_t vocab, const DraftRequest& r, int32_t branch,
                 int32_t depth) override {
    if (is_greedy(r.sampler)) {
      const int32_t t = argmax(logits, vocab);
      return DraftPick{t, one_hot(t), predicted_for(r, logits, vocab, {})};
    }
    DraftPick p;
    p.q = process(logits, vocab, r.sampler);
    p.predicted = predicted_for(r, logits, vocab, p.q);
    apply_saguaro(r, depth, p.q);
    p.token = sample(p.q, philox_uniform(r.sampler.seed, r.stream, r.position + depth - 1,
                                         kLaneDrafter + branch));
    return p;
  }
};

}  // namespace

ModelDrafter::ModelDrafter(ModelFile draft, Backend& backend, const ModelDrafterOptions& opts)
    : file_(std::make_unique<ModelFile>(std::move(draft))) {
  const std::string& dpath = file_->path();
  const std::string& tpath = opts.target_vocab.source;
  SSD_CHECK(opts.target_vocab.count > 0 && opts.draft_vocab.count > 0,
            "--drafter model:{}: the vocabularies of the target ({}) and the draft ({}) must both "
            "be given to check they match",
            dpath, opts.target_vocab.count, opts.draft_vocab.count);
  SSD_CHECK(file_->config().vocab == opts.target_logits,
            "--drafter model:{}: the draft model has {} logits per token but the target {} has "
            "{}; draft and target must share one vocabulary",
            dpath, file_->config().vocab, tpath, opts.target_logits);
  SSD_CHECK(opts.draft_vocab.same_vocab(opts.target_vocab),
            "--drafter model:{}: its tokenizer ({}: {}) differs from the target's ({}: {}); the "
            "draft model must use the target's tokenizer",
            dpath, opts.draft_vocab.source, opts.draft_vocab.describe(), tpath,
            opts.target_vocab.describe());
  model_ = std::make_unique<Transformer>(*file_, backend);
  runner_ = std::make_unique<ModelDraftRunner>(*model_, opts.kv_tokens, opts.prefill_chunk,
                                               "model drafter " + dpath);
  prefill_chunk_ = opts.prefill_chunk;
}

std::vector<WarmupSite> ModelDrafter::warmup_sites(const WarmupPlan& plan) {
  return {WarmupSite{"drafter " + name(), model_.get(), &runner_->kv(), prefill_chunk_,
                     drafter_warmup_sizes(plan)}};
}

std::string ModelDrafter::name() const { return "model:" + file_->path(); }

void ModelDrafter::start(int32_t seq, std::span<const int32_t> prompt) {
  runner_->start(seq, prompt);
}

void ModelDrafter::commit(int32_t seq, std::span<const int32_t> tokens) {
  runner_->commit(seq, tokens);
}

std::vector<DraftTree> ModelDrafter::draft(std::span<const DraftRequest> requests) {
  SampledPolicy policy;
  return runner_->draft(requests, policy);
}

void ModelDrafter::finish(int32_t seq) { runner_->finish(seq); }

}  // namespace ssd
