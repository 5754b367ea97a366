// Implementation of process() / sample(). The cost that matters is a 49k vocabulary per call,
// for every verified and drafted position, so process() orders no more tokens than it keeps
// (plus at most one binade of e below the top-p cut):
//   - top-k: one pass with a k-entry heap, then exp and sort of k tokens only;
//   - min-p alone: only tokens above a logit threshold get an exp; Z is never needed;
//   - otherwise e for the whole vocabulary (Z needs it), then a floor on e below which nothing
//     can survive (min-p's threshold; for top-p the binade where the cumulative mass crosses p),
//     and only the tokens above the floor are gathered and radix-sorted. The top-p cut itself is
//     a running sum in sorted order, so the floor never changes the result.
// The whole-vocabulary passes live in vocab_scan.{h,cpp}. Every sum (Z, top-p's running sum,
// the survivors' total, the draw's running sum) is in the blocked order of
// kernels/common/blocked_scan.h, the order the device sampler's thread blocks share, so the two
// give the same list and the same draw bit for bit.
#include "runtime/sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/common/blocked_scan.h"
#include "runtime/core/error.h"
#include "runtime/sampling/vocab_scan.h"

namespace ssd {

using namespace sampling_detail;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// Scratch reused across calls on the same thread (process() runs once per position).
struct Scratch {
  std::vector<double> e;       // [n] unnormalised probability by token id
  std::vector<double> x;       // [n] exponent scratch for relative_exp
  std::vector<uint64_t> keys;  // candidate order keys
  std::vector<uint64_t> tmp;   // radix sort buffer
  std::vector<double> pre;     // the sorted list's chunk prefixes (blocked_scan.h)
};

// pre = the chunk prefixes (kernels/common/blocked_scan.h) of the sorted list's e.
void list_prefix(const std::vector<uint64_t>& keys, const std::vector<double>& e,
                 std::vector<double>& pre) {
  const auto n = static_cast<int64_t>(keys.size());
  pre.resize(static_cast<size_t>(kernels::hd::scan_chunks(n)));
  kernels::hd::chunk_prefix(n, [&](int64_t i) { return e[key_id(keys[i])]; }, pre.data());
}

// The smallest prefix of the sorted keys whose blocked running sum of e reaches `target`, or
// all of them when it never does (only possible through rounding, or when a min-p floor removed
// the mass the target needs: then min-p's cut is the shorter one). pre: list_prefix's.
size_t top_p_count(const std::vector<double>& pre, const std::vector<uint64_t>& keys,
                   const std::vector<double>& e, double target) {
  return static_cast<size_t>(kernels::hd::blocked_top_p_count(
      pre.data(), static_cast<int64_t>(keys.size()),
      [&](int64_t i) { return e[key_id(keys[i])]; }, target));
}

// Min-p without top-p needs e only for tokens with e >= min_p, i.e. with a logit at least
// l_max + t * ln(min_p). A pass over the logits with that threshold lowered by a safety margin
// finds the candidates; the exact test e >= min_p is then the same as in the general path.
// Leaves the survivors sorted in s.keys; false when the threshold is not usable (e.g. a huge t).
bool gather_min_p_only(const float* logits, int32_t n, float l_max, double t, double min_p,
                       Scratch& s) {
  const double exact = static_cast<double>(l_max) + t * std::log(min_p);
  const double threshold = exact - (1e-6 * (std::abs(exact) + std::abs(l_max)) + 1e-30);
  if (!std::isfinite(threshold)) return false;
  s.keys.clear();
  for (int32_t i = 0; i < n; ++i) {
    if (!(logits[i] >= threshold)) continue;  // also skips NaN
    const double e = relative_exp_one(logits[i], l_max, t);
    if (e > 0 && e >= min_p) {
      s.e[i] = e;
      s.keys.push_back(order_key(logits[i], i));
    }
  }
  sort_gathered_keys(s.keys, s.tmp);
  return true;
}

}  // namespace

void validate(const SamplerConfig& cfg) {
  SSD_CHECK(std::isfinite(cfg.temperature) && cfg.temperature >= 0,
            "sampler: temperature must be a finite number >= 0 (got {})", cfg.temperature);
  SSD_CHECK(cfg.top_k >= 0, "sampler: top_k must be >= 0 (got {})", cfg.top_k);
  SSD_CHECK(cfg.top_p > 0 && cfg.top_p <= 1, "sampler: top_p must be in (0, 1] (got {})",
            cfg.top_p);
  SSD_CHECK(cfg.min_p >= 0 && cfg.min_p <= 1, "sampler: min_p must be in [0, 1] (got {})",
            cfg.min_p);
}

double ProcessedDist::prob_of(int32_t id) const {
  for (const TokenProb& t : tokens)
    if (t.id == id) return t.prob;
  return 0;
}

int32_t argmax(const float* logits, int32_t n) {
  SSD_CHECK(n > 0, "argmax: empty logits (n = {})", n);
  const float m = max_logit(logits, n);  // -inf when every logit is -inf or NaN
  const float* first = std::find(logits, logits + n, m);
  SSD_CHECK(first != logits + n, "argmax: all {} logits are NaN", n);
  return static_cast<int32_t>(first - logits);
}

ProcessedDist process(const float* logits, int32_t n, const SamplerConfig& cfg) {
  ProcessedDist d;
  process_into(logits, n, cfg, d);
  return d;
}

void process_into(const float* logits, int32_t n, const SamplerConfig& cfg, ProcessedDist& out) {
  validate(cfg);
  SSD_CHECK(n > 0, "sampler: empty logits (n = {})", n);
  if (is_greedy(cfg)) {
    out.tokens.assign(1, TokenProb{argmax(logits, n), 1.0});
    return;
  }

  // 1. The top logit; NaN and -inf never win and get probability 0 below.
  const float l_max = max_logit(logits, n);
  SSD_CHECK(l_max < kInf, "sampler: logit of token {} is +inf",
            std::find(logits, logits + n, kInf) - logits);
  SSD_CHECK(l_max > -kInf, "sampler: all {} logits are -inf or NaN", n);

  thread_local Scratch s;
  std::vector<double>& e = s.e;
  std::vector<uint64_t>& keys = s.keys;
  e.resize(static_cast<size_t>(n));
  const double t = cfg.temperature;
  const double top_p = cfg.top_p, min_p = cfg.min_p;

  size_t keep = 0;
  if (cfg.top_k > 0 && top_k_keys(logits, n, cfg.top_k, keys)) {
    // 2. top-k: only k tokens are left; order them and apply the rest by scans.
    std::sort(keys.begin(), keys.end());
    for (const uint64_t k : keys) e[key_id(k)] = relative_exp_one(logits[key_id(k)], l_max, t);
    list_prefix(keys, e, s.pre);
    const double z = kernels::hd::blocked_sum(  // 3., over the top-k survivors
        s.pre.data(), static_cast<int64_t>(keys.size()),
        [&](int64_t i) { return e[key_id(keys[i])]; });
    keep = top_p < 1 ? top_p_count(s.pre, keys, e, top_p * z) : keys.size();  // 4.
    if (min_p > 0) {                                                     // 5.
      size_t i = 0;
      while (i < keep && e[key_id(keys[i])] >= min_p) ++i;
      keep = i;
    }
  } else if (top_p >= 1 && min_p > 0 && gather_min_p_only(logits, n, l_max, t, min_p, s)) {
    keep = keys.size();  // 5. (no top-p, so Z over the vocabulary is never needed)
    list_prefix(keys, e, s.pre);
  } else {
    s.x.resize(static_cast<size_t>(n));
    const double z = relative_exp(logits, n, l_max, t, e.data(), s.x.data());  // 3.
    // Nothing below `floor` survives: min-p keeps e >= min_p (5.), and top-p keeps nothing
    // below the binade where the mass crosses p. That binade is searched for a little past the
    // target, so that rounding in the binade sums (~n * 2^-53 * Z, 5e-12 Z for n = 49152) cannot
    // put the exact cut below the floor.
    double floor = min_p;
    if (top_p < 1) floor = std::max(floor, mass_floor(e.data(), n, top_p * z + 1e-9 * z));
    keys.clear();
    for (int32_t i = 0; i < n; ++i)
      if (e[i] > 0 && e[i] >= floor) keys.push_back(order_key(logits[i], i));
    sort_gathered_keys(keys, s.tmp);
    list_prefix(keys, e, s.pre);
    keep = top_p < 1 ? top_p_count(s.pre, keys, e, top_p * z) : keys.size();  // 4.
  }
  while (keep > 1 && e[key_id(keys[keep - 1])] == 0) --keep;  // probability 0 (see kMinExponent)

  // 6. Renormalise over the survivors (the list's prefixes hold for any prefix of it).
  const double sum = kernels::hd::blocked_sum(s.pre.data(), static_cast<int64_t>(keep),
                                              [&](int64_t i) { return e[key_id(keys[i])]; });
  out.tokens.resize(keep);
  for (size_t i = 0; i < keep; ++i) {
    const int32_t id = key_id(keys[i]);
    out.tokens[i] = {id, e[id] / sum};
  }
}

int32_t sample(const ProcessedDist& dist, double u) {
  SSD_CHECK(!dist.tokens.empty(), "sample: empty distribution");
  SSD_CHECK(u >= 0 && u < 1, "sample: u must be in [0, 1) (got {})", u);
  thread_local std::vector<double> pre;
  const auto n = static_cast<int64_t>(dist.tokens.size());
  auto p = [&](int64_t i) { return dist.tokens[i].prob; };
  pre.resize(static_cast<size_t>(kernels::hd::scan_chunks(n)));
  kernels::hd::chunk_prefix(n, p, pre.data());
  // Every probability is > 0, so the search finds an entry (the last one when u * total
  // rounded up to the total).
  return dist.tokens[kernels::hd::blocked_inverse_cdf(pre.data(), n, p, u)].id;
}

Sampler::Sampler(const SamplerConfig& cfg) : cfg_(cfg) { validate(cfg_); }

int32_t Sampler::sample(const float* logits, int32_t n, uint64_t stream, uint32_t step) const {
  if (is_greedy(cfg_)) return argmax(logits, n);
  thread_local ProcessedDist dist;  // reused: the temperature-only list is the whole vocabulary
  process_into(logits, n, cfg_, dist);
  return ssd::sample(dist, uniform(stream, step, kLaneToken));
}

}  // namespace ssd
