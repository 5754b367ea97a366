// A deliberately naive reference of the process() pipeline (sampler.h), used to check the fast
// implementation: every step done on the whole vocabulary with a full sort, in long double, in
// the plainest order. It shares no code with runtime/sampling/sampler.cpp.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

#include "runtime/sampling/sampler.h"

namespace ssd::testing {

struct RefToken {
  int32_t id;
  long double prob;
};

// Also reports how far the top-p running sum was from the target at the cut (both sides), so a
// test can tell whether a case sits too close to a boundary to expect bit-identical supports.
struct RefDist {
  std::vector<RefToken> tokens;
  long double top_p_margin = 1;  // min |running sum - target| over the two sums around the cut
};

inline RefDist reference_process(const std::vector<float>& logits, const SamplerConfig& cfg) {
  const int32_t n = static_cast<int32_t>(logits.size());
  RefDist out;
  if (cfg.temperature == 0) {
    int32_t best = 0;
    for (int32_t i = 1; i < n; ++i)
      if (logits[i] > logits[best]) best = i;
    out.tokens.push_back({best, 1.0L});
    return out;
  }
  std::vector<int32_t> ids;
  for (int32_t i = 0; i < n; ++i)
    if (std::isfinite(logits[i])) ids.push_back(i);
  std::sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  if (cfg.top_k > 0 && static_cast<size_t>(cfg.top_k) < ids.size()) ids.resize(cfg.top_k);
  const long double top = logits[ids[0]];
  std::vector<long double> p(ids.size());
  for (size_t i = 0; i < ids.size(); ++i)
    p[i] = std::exp((static_cast<long double>(logits[ids[i]]) - top) / cfg.temperature);
  const long double z = std::accumulate(p.begin(), p.end(), 0.0L);
  for (auto& v : p) v /= z;
  size_t keep = ids.size();
  if (cfg.top_p < 1) {
    long double run = 0;
    for (size_t i = 0; i < ids.size(); ++i) {
      const long double before = run;
      run += p[i];
      if (run >= cfg.top_p) {
        keep = i + 1;
        out.top_p_margin = std::min(run - cfg.top_p, cfg.top_p - before);
        break;
      }
    }
  }
  if (cfg.min_p > 0) {
    size_t m = 0;
    while (m < keep && p[m] >= cfg.min_p * p[0]) ++m;
    keep = m;
  }
  while (keep > 1 && p[keep - 1] == 0) --keep;
  long double s = 0;
  for (size_t i = 0; i < keep; ++i) s += p[i];
  for (size_t i = 0; i < keep; ++i) out.tokens.push_back({ids[i], p[i] / s});
  return out;
}

}  // namespace ssd::testing
