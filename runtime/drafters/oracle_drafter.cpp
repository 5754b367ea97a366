// RESEARCH ONLY: see oracle_drafter.h.
#include "runtime/drafters/oracle_drafter.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>

#include "runtime/core/error.h"
#include "runtime/saguaro/saguaro_sampling.h"

namespace ssd {
namespace {

// The best token other than `star` (lowest id on ties, NaN skipped); -1 when there is none.
int32_t runner_up(const float* logits, int32_t vocab, int32_t star) {
  int32_t best = -1;
  for (int32_t i = 0; i < vocab; ++i) {
    if (i == star || std::isnan(logits[i])) continue;
    if (best < 0 || logits[i] > logits[best]) best = i;
  }
  return best;
}

class OraclePolicy final : public DraftPolicy {
 public:
  explicit OraclePolicy(double alpha) : alpha_(alpha) {}

  std::vector<DraftPick> first(const float* logits, int32_t vocab, const DraftRequest& r,
                               int32_t width) override {
    ProcessedDist q = mixture_at(logits, vocab, r, 0, 1);
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
    DraftPick p;
    p.q = mixture_at(logits, vocab, r, branch, depth);
    p.predicted = predicted_for(r, logits, vocab, p.q);
    apply_saguaro(r, depth, p.q);
    p.token = sample(p.q, philox_uniform(r.sampler.seed, r.stream, r.position + depth - 1,
                                         kLaneDrafter + branch));
    return p;
  }

 private:
  // The q of the header for the target logits at (branch, depth).
  ProcessedDist mixture_at(const float* logits, int32_t vocab, const DraftRequest& r,
                           int32_t branch, int32_t depth) const {
    if (is_greedy(r.sampler)) {
      const int32_t star = argmax(logits, vocab);
      const int32_t second = runner_up(logits, vocab, star);
      return oracle_mixture(star, second < 0 ? ProcessedDist{} : one_hot(second), alpha_);
    }
    const ProcessedDist p = process(logits, vocab, r.sampler);
    const double u = philox_uniform(r.sampler.seed, r.stream, r.position + depth - 1,
                                    kLaneOracleTarget + branch);
    const int32_t star = sample(p, u);
    const int32_t removed[1] = {star};
    return oracle_mixture(star, without_tokens(p, removed), alpha_);
  }

  double alpha_;
};

}  // namespace

ProcessedDist oracle_mixture(int32_t star, const ProcessedDist& other, double alpha) {
  if (other.tokens.empty() || alpha >= 1) return one_hot(star);
  ProcessedDist q;
  if (alpha > 0) q.tokens.push_back(TokenProb{star, alpha});
  double total = alpha > 0 ? alpha : 0.0;
  for (const TokenProb& tp : other.tokens) {
    SSD_CHECK(tp.id != star, "oracle drafter: the alternative distribution contains t* = {}", star);
    const double m = (1 - alpha) * tp.prob;
    if (m <= 0) continue;
    q.tokens.push_back(TokenProb{tp.id, m});
    total += m;
  }
  for (TokenProb& tp : q.tokens) tp.prob /= total;  // exact sum 1 to rounding for verify
  std::stable_sort(q.tokens.begin(), q.tokens.end(), [](const TokenProb& a, const TokenProb& b) {
    return a.prob > b.prob || (a.prob == b.prob && a.id < b.id);
  });
  return q;
}

OracleDrafter::OracleDrafter(Transformer& target, const OracleOptions& opts) : opts_(opts) {
  SSD_CHECK(std::isfinite(opts.alpha) && opts.alpha >= 0 && opts.alpha <= 1,
            "--drafter oracle:{}: ALPHA must be a probability in [0, 1]", opts.alpha);
  SSD_CHECK(opts.cost_us >= 0, "oracle drafter: simulated cost {} us must not be negative",
            opts.cost_us);
  runner_ = std::make_unique<ModelDraftRunner>(target, opts.kv_tokens, opts.prefill_chunk,
                                               "oracle drafter");
}

OracleDrafter::~OracleDrafter() = default;

std::string OracleDrafter::name() const {
  return fmt::format("oracle:{:g} (research only)", opts_.alpha);
}

void OracleDrafter::start(int32_t seq, std::span<const int32_t> prompt) {
  runner_->start(seq, prompt);
}

void OracleDrafter::commit(int32_t seq, std::span<const int32_t> tokens) {
  runner_->commit(seq, tokens);
}

std::vector<DraftTree> OracleDrafter::draft(std::span<const DraftRequest> requests) {
  if (opts_.cost_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(opts_.cost_us));
  OraclePolicy policy(opts_.alpha);
  return runner_->draft(requests, policy);
}

void OracleDrafter::finish(int32_t seq) { runner_->finish(seq); }

}  // namespace ssd
