#include "runtime/drafters/early_exit_drafter.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "runtime/core/error.h"
#include "runtime/saguaro/saguaro_sampling.h"

namespace ssd {
namespace {

double now_s() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

// log softmax(l)[token] at temperature 1 over the whole row.
float log_prob(const float* l, int64_t vocab, int32_t token) {
  double m = l[0];
  for (int64_t v = 1; v < vocab; ++v) m = std::max<double>(m, l[v]);
  double sum = 0;
  for (int64_t v = 0; v < vocab; ++v) sum += std::exp(static_cast<double>(l[v]) - m);
  return static_cast<float>(static_cast<double>(l[token]) - m - std::log(sum));
}

}  // namespace

// The draft head as a DraftPolicy: logits = W z + LoRA(z) with z = norm(h_L), one chain per
// request (the requests it is given have width 1), and what observe() learns from when learning.
class EarlyExitDrafter::HeadPolicy final : public DraftPolicy {
 public:
  // prev[i]: the token request i's first draft token follows (its last suffix or context token).
  HeadPolicy(EarlyExitDrafter& d, std::span<const DraftRequest> requests, std::vector<int32_t> prev)
      : d_(d), requests_(requests), prev_(std::move(prev)), recs_(requests.size()) {}

  bool wants_hidden() const override { return true; }

  void prepare(std::span<const float> hidden, std::span<float> logits, int64_t m) override {
    z_.assign(hidden.begin(), hidden.end());  // [m, dim]
    d_.normalise(z_.data(), m);  // the forward's logits are already W z of these very rows
    if (d_.trainer_) base_.assign(logits.begin(), logits.end());  // [m, vocab]
    d_.head_.add_correction(z_.data(), logits.data(), m);
    row_ = 0;
  }

  std::vector<DraftPick> first(const float* logits, int32_t vocab, const DraftRequest& r,
                               int32_t) override {
    return {pick(logits, vocab, r, 1)};
  }
  DraftPick next(const float* logits, int32_t vocab, const DraftRequest& r, int32_t,
                 int32_t depth) override {
    return pick(logits, vocab, r, depth);
  }

  std::vector<PendingDraft>& records() { return recs_; }  // [requests]

 private:
  // Called in row order after prepare(), so row_ indexes z_ and base_.
  DraftPick pick(const float* l, int32_t vocab, const DraftRequest& r, int32_t depth) {
    const int64_t a = row_++;
    DraftPick p;
    if (is_greedy(r.sampler)) {
      p.token = argmax(l, vocab);
      p.q = one_hot(p.token);
      p.predicted = predicted_for(r, l, vocab, {});
    } else {
      p.q = process(l, vocab, r.sampler);
      p.predicted = predicted_for(r, l, vocab, p.q);
      apply_saguaro(r, depth, p.q);
      p.token = sample(p.q, philox_uniform(r.sampler.seed, r.stream, r.position + depth - 1,
                                           kLaneEarlyExitDraft));
    }
    if (d_.trainer_) {
      const size_t i = static_cast<size_t>(&r - requests_.data());
      const int64_t dim = d_.cfg_.dim;
      PendingDraft& rec = recs_[i];
      rec.prev.push_back(rec.tokens.empty() ? prev_[i] : rec.tokens.back());
      rec.tokens.push_back(p.token);
      rec.z.insert(rec.z.end(), z_.begin() + a * dim, z_.begin() + (a + 1) * dim);
      rec.base.insert(rec.base.end(), base_.begin() + a * vocab, base_.begin() + (a + 1) * vocab);
      rec.logq.push_back(log_prob(l, vocab, p.token));
    }
    return p;
  }

  EarlyExitDrafter& d_;
  std::span<const DraftRequest> requests_;
  std::vector<int32_t> prev_;        // [requests]
  std::vector<PendingDraft> recs_;   // [requests]
  std::vector<float> z_, base_;      // [m, dim], [m, vocab] of the current forward
  int64_t row_ = 0;
};

EarlyExitDrafter::EarlyExitDrafter(const ModelFile& target, Backend& backend,
                                   const EarlyExitOptions& opts)
    : opts_(opts),
      cfg_(target.config()),
      head_(target.config().dim, target.config().vocab, opts.lora) {
  SSD_CHECK(opts.layers >= 1 && opts.layers <= cfg_.n_layers,
            "early-exit drafter: L = {} must be in 1..{} (the layers of {})", opts.layers,
            cfg_.n_layers, target.path());
  SSD_CHECK(opts.kv_tokens >= 0, "early-exit drafter: KV capacity {} must not be negative",
            opts.kv_tokens);
  SSD_CHECK(opts.prefill_chunk >= 1, "early-exit drafter: prefill chunk {} must be positive",
            opts.prefill_chunk);
  model_ = std::make_unique<Transformer>(target, backend, opts.layers);
  SSD_CHECK(model_->lm_head().rows == cfg_.vocab && model_->lm_head().cols == cfg_.dim,
            "early-exit drafter: LM head of {} is [{}, {}], expected [{}, {}]", target.path(),
            model_->lm_head().rows, model_->lm_head().cols, cfg_.vocab, cfg_.dim);
  runner_ = std::make_unique<ModelDraftRunner>(*model_, opts.kv_tokens, opts.prefill_chunk,
                                               "early-exit drafter");
  if (opts.online_learning) trainer_ = std::make_unique<DviTrainer>(head_, opts.dvi);
}

EarlyExitDrafter::~EarlyExitDrafter() = default;

std::string EarlyExitDrafter::name() const {
  return "early-exit:" + std::to_string(model_->layers()) + (trainer_ ? "+dvi" : "");
}

void EarlyExitDrafter::start(int32_t seq, std::span<const int32_t> prompt) {
  pending_.erase(seq);
  runner_->start(seq, prompt);
}

void EarlyExitDrafter::commit(int32_t seq, std::span<const int32_t> tokens) {
  runner_->commit(seq, tokens);
}

void EarlyExitDrafter::finish(int32_t seq) {
  pending_.erase(seq);
  runner_->finish(seq);
}

void EarlyExitDrafter::normalise(float* h, int64_t n) {
  model_->backend().rmsnorm(h, model_->output_norm().data(), h, n, cfg_.dim, cfg_.rms_eps);
}

std::vector<float> EarlyExitDrafter::head_logits(std::span<const float> h, int64_t n) {
  SSD_CHECK(static_cast<int64_t>(h.size()) == n * cfg_.dim,
            "early-exit head: {} hidden values for {} rows of dim {}", h.size(), n, cfg_.dim);
  std::vector<float> z(h.begin(), h.end());  // [n, dim]
  normalise(z.data(), n);
  std::vector<float> logits(static_cast<size_t>(n * cfg_.vocab));  // [n, vocab]
  model_->backend().matmul(model_->lm_head(), z.data(), logits.data(), n);
  head_.add_correction(z.data(), logits.data(), n);
  return logits;
}

std::vector<float> EarlyExitDrafter::hidden_of(std::span<const int32_t> tokens) {
  KvCache& kv = runner_->kv();
  const SeqId s = kv.create();
  struct Release {
    KvCache& kv;
    SeqId s;
    ~Release() { kv.release(s); }
  } release{kv, s};
  Batch b = Batch::sequence(s, std::vector<int32_t>(tokens.begin(), tokens.end()), 0);
  b.logits_rows.clear();
  b.hidden_layers = {static_cast<int32_t>(model_->layers() - 1)};
  return model_->forward(b, kv).hidden.at(0);
}

std::vector<DraftTree> EarlyExitDrafter::draft(std::span<const DraftRequest> requests) {
  std::vector<DraftRequest> chains(requests.begin(), requests.end());  // width 1: one chain each
  std::vector<int32_t> prev(chains.size(), 0);
  for (size_t i = 0; i < chains.size(); ++i) {
    DraftRequest& r = chains[i];
    r.width = 1;
    pending_.erase(r.seq);  // a new draft supersedes what the last one left for observe()
    const std::vector<int32_t>& context = runner_->context(r.seq);
    if (!r.suffix.empty())
      prev[i] = r.suffix.back();
    else if (!context.empty())
      prev[i] = context.back();
  }
  HeadPolicy policy(*this, chains, std::move(prev));
  std::vector<DraftTree> trees = runner_->draft(chains, policy);
  if (trainer_)
    for (size_t i = 0; i < chains.size(); ++i)
      if (!policy.records()[i].tokens.empty())
        pending_[chains[i].seq].push_back(std::move(policy.records()[i]));
  return trees;
}

void EarlyExitDrafter::observe(const DraftOutcome& o) {
  SSD_CHECK(o.tree != nullptr, "early-exit drafter: outcome of sequence {} has no tree", o.seq);
  const DraftTree& tree = *o.tree;
  rounds_.push_back({static_cast<int32_t>(tree.size()), static_cast<int32_t>(o.path.size())});
  if (!trainer_ || tree.empty()) return;
  auto it = pending_.find(o.seq);
  if (it == pending_.end()) return;
  SSD_CHECK(o.vocab == cfg_.vocab && o.target_logits != nullptr,
            "early-exit drafter: outcome has {} logits per row, the model {}", o.vocab, cfg_.vocab);
  // The outcome judges one of the drafts of the last call (SSD may have asked several).
  for (PendingDraft& rec : it->second) {
    if (rec.tokens != tree.tokens || !tree.is_chain()) continue;
    const int32_t n = static_cast<int32_t>(tree.size());
    const int32_t acc = static_cast<int32_t>(o.path.size());
    const int64_t dim = cfg_.dim, vocab = cfg_.vocab;
    double log_s = 0;
    // One tuple per drafted position up to and including the first reject.
    for (int32_t i = 0; i <= std::min(acc, n - 1); ++i) {
      const double tl = now_s();
      DviTuple t;
      t.z.assign(rec.z.begin() + i * dim, rec.z.begin() + (i + 1) * dim);
      t.base_logits.assign(rec.base.begin() + i * vocab, rec.base.begin() + (i + 1) * vocab);
      t.token = rec.tokens[i];
      t.prev_token = rec.prev[i];
      t.reward = i < acc ? 1.0f : 0.0f;
      t.logq_behavior = rec.logq[i];
      const int32_t row = tree.parents[i] + 1;  // the target's distribution that judged node i
      trainer_->target_dist(o.target_logits + static_cast<int64_t>(row) * vocab, t.p_ids, t.p_probs);
      log_s += now_s() - tl;
      trainer_->add(std::move(t));
    }
    trainer_->stats().log_s += log_s;
    break;
  }
  pending_.erase(it);
}

}  // namespace ssd
