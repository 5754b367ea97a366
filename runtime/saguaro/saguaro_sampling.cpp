#include "runtime/saguaro/saguaro_sampling.h"

#include <algorithm>
#include <cmath>

#include "runtime/core/error.h"

namespace ssd {

ProcessedDist saguaro_reshape(const ProcessedDist& q, int32_t top_f, double c) {
  SSD_CHECK(std::isfinite(c) && c > 0 && c <= 1, "saguaro sampling: C = {} must be in (0, 1]", c);
  const size_t f = top_f > 0 ? static_cast<size_t>(top_f) : 0;
  if (c == 1 || f == 0 || f >= q.tokens.size()) return q;
  ProcessedDist out = q;
  double total = 0;
  for (size_t i = 0; i < out.tokens.size(); ++i) {
    if (i < f) out.tokens[i].prob *= c;
    total += out.tokens[i].prob;
  }
  // Summed over the scaled list rather than 1 - (1 - c) * mass, so the result sums to 1 to
  // rounding whatever q's own rounding was (verify.h checks the sum to 1e-6).
  for (TokenProb& tp : out.tokens) tp.prob /= total;
  std::stable_sort(out.tokens.begin(), out.tokens.end(),
                   [](const TokenProb& a, const TokenProb& b) {
                     return a.prob > b.prob || (a.prob == b.prob && a.id < b.id);
                   });
  return out;
}

int32_t saguaro_top_f_at(const DraftRequest& r, int32_t depth) {
  if (r.saguaro_c == 1 || is_greedy(r.sampler) || depth < 1) return 0;
  if (static_cast<size_t>(depth) > r.saguaro_top_f.size()) return 0;
  return std::max(0, r.saguaro_top_f[depth - 1]);
}

void apply_saguaro(const DraftRequest& r, int32_t depth, ProcessedDist& q) {
  const int32_t f = saguaro_top_f_at(r, depth);
  if (f > 0) q = saguaro_reshape(q, f, r.saguaro_c);
}

ProcessedDist top_entries(const ProcessedDist& d, int32_t n) {
  ProcessedDist out;
  const size_t m = std::min<size_t>(d.tokens.size(), n > 0 ? static_cast<size_t>(n) : 0);
  out.tokens.assign(d.tokens.begin(), d.tokens.begin() + m);
  return out;
}

ProcessedDist top_of_logits(const float* logits, int32_t vocab, int32_t n) {
  if (n <= 0) return {};
  SamplerConfig cfg;
  cfg.temperature = 1;
  cfg.top_k = n;
  return process(logits, vocab, cfg);
}

ProcessedDist predicted_for(const DraftRequest& r, const float* logits, int32_t vocab,
                            const ProcessedDist& processed) {
  if (r.predict_top <= 0) return {};
  if (is_greedy(r.sampler)) return top_of_logits(logits, vocab, r.predict_top);
  return top_entries(processed, r.predict_top);
}

}  // namespace ssd
