#include "runtime/spec/spec_length.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "runtime/core/error.h"
#include "runtime/core/median.h"

namespace ssd {

double expected_tokens(std::span<const double> a, int32_t k) {
  double e = 1, p = 1;
  for (int32_t i = 0; i < k && i < static_cast<int32_t>(a.size()); ++i) {
    p *= a[i];
    e += p;
  }
  return e;
}

void CostLine::observe(int64_t x, double seconds) {
  SSD_CHECK(x >= 0 && std::isfinite(seconds) && seconds >= 0,
            "cost line: bad observation ({}, {} s)", x, seconds);
  Point& p = points_[x];
  if (p.latest.size() < kWindow) {
    p.latest.push_back(seconds);
  } else {
    p.latest[p.next] = seconds;
    p.next = (p.next + 1) % kWindow;
  }
  ++n_;
}

double CostLine::Point::median() const { return ssd::median(latest); }

int32_t CostLine::distinct_positive() const {
  int32_t n = 0;
  for (const auto& [x, p] : points_) n += x > 0 ? 1 : 0;
  return n;
}

// The weighted least-squares line through the per-x medians (x > 0), with the noise rules of the
// header: a falling line is flat at the mean, a negative fixed cost goes through the origin.
CostLine::Line CostLine::line() const {
  double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const auto& [px, p] : points_) {
    if (px <= 0) continue;
    const double xd = static_cast<double>(px), w = static_cast<double>(p.latest.size());
    const double y = p.median();
    sw += w;
    sx += w * xd;
    sy += w * y;
    sxx += w * xd * xd;
    sxy += w * xd * y;
  }
  if (sw == 0) return {};
  const double den = sw * sxx - sx * sx;
  if (distinct_positive() < 2 || den <= 0) return {0, sxy / sxx};  // through the origin
  const double slope = (sw * sxy - sx * sy) / den;
  const double icept = (sy - slope * sx) / sw;
  if (slope < 0) return {sy / sw, 0};
  if (icept < 0) return {0, sxy / sxx};
  return {icept, slope};
}

// Per-x medians made non-decreasing in x (pool adjacent violators, weighted by observations):
// a larger forward never costs less, and a cost that steps up (a kernel that changes path at some
// row count) keeps its step instead of being averaged into a line.
std::vector<CostLine::Knot> CostLine::knots() const {
  std::vector<Knot> k;
  for (const auto& [px, p] : points_) {
    if (px <= 0) continue;
    Knot n{static_cast<double>(px), static_cast<double>(px), p.median(),
           static_cast<double>(p.latest.size())};
    while (!k.empty() && k.back().y > n.y) {  // pool with the block before
      const Knot& b = k.back();
      n = Knot{b.x_lo, n.x_hi, (b.y * b.w + n.y * n.w) / (b.w + n.w), b.w + n.w};
      k.pop_back();
    }
    k.push_back(n);
  }
  return k;
}

double CostLine::predict(int64_t x) const {
  if (x <= 0) {
    const auto it = points_.find(0);
    return it == points_.end() ? 0.0 : it->second.median();
  }
  const std::vector<Knot> k = knots();
  if (k.empty()) return 0.0;
  const Line l = line();
  const double xd = static_cast<double>(x);
  if (distinct_positive() < 2) return l.icept + l.slope * xd;  // one x: through the origin
  if (xd < k.front().x_lo) return std::max(0.0, k.front().y - l.slope * (k.front().x_lo - xd));
  if (xd > k.back().x_hi) return k.back().y + l.slope * (xd - k.back().x_hi);
  for (size_t i = 0; i < k.size(); ++i) {
    if (xd <= k[i].x_hi) return k[i].y;  // inside a pooled block: flat
    if (i + 1 < k.size() && xd < k[i + 1].x_lo) {  // between two blocks: linear
      const double t = (xd - k[i].x_hi) / (k[i + 1].x_lo - k[i].x_hi);
      return k[i].y + t * (k[i + 1].y - k[i].y);
    }
  }
  return k.back().y;
}

std::vector<int32_t> choose_lengths(std::span<const std::vector<double>> accept,
                                    std::span<const int32_t> limit, const RoundCosts& costs) {
  SSD_CHECK(accept.size() == limit.size(), "choose_lengths: {} rate lists for {} limits",
            accept.size(), limit.size());
  const int64_t B = static_cast<int64_t>(limit.size());
  struct Gain {
    double g;
    int32_t i;  // draft position, 1-based
    size_t b;
  };
  std::vector<Gain> gains;
  for (size_t b = 0; b < limit.size(); ++b) {
    SSD_CHECK(limit[b] >= 0 && limit[b] <= static_cast<int32_t>(accept[b].size()),
              "choose_lengths: limit {} of sequence {} outside 0..{}", limit[b], b,
              accept[b].size());
    double p = 1;
    for (int32_t i = 1; i <= limit[b]; ++i) {
      p *= std::clamp(accept[b][i - 1], 0.0, 1.0);
      gains.push_back({p, i, b});
    }
  }
  // Largest gains first; equal gains by position, so each sequence's picks stay a prefix.
  std::stable_sort(gains.begin(), gains.end(), [](const Gain& x, const Gain& y) {
    return x.g != y.g ? x.g > y.g : x.i < y.i;
  });
  size_t best_n = 0;
  double best_rate = -1, tokens = static_cast<double>(B);
  for (size_t n = 0; n <= gains.size(); ++n) {
    if (n > 0) tokens += gains[n - 1].g;
    const int64_t N = static_cast<int64_t>(n);
    const double cost = costs.draft.predict(N) + costs.verify.predict(B + N);
    const double rate = cost > 0 ? tokens / cost : (n == 0 ? 1.0 : 0.0);
    if (rate > best_rate) {
      best_rate = rate;
      best_n = n;
    }
  }
  std::vector<int32_t> k(limit.size(), 0);
  for (size_t n = 0; n < best_n; ++n) k[gains[n].b] = std::max(k[gains[n].b], gains[n].i);
  return k;
}

PositionAcceptance::PositionAcceptance(int32_t k_max) : trials_(k_max, 0.0), successes_(k_max, 0.0) {}

void PositionAcceptance::observe(int32_t offered, int32_t accepted) {
  offered = std::min<int32_t>(offered, static_cast<int32_t>(trials_.size()));
  if (offered <= 0) return;
  SSD_CHECK(accepted >= 0 && accepted <= offered, "acceptance: {} accepted of {} offered",
            accepted, offered);
  const double keep = std::exp2(-1.0 / kHalfLife);
  for (size_t j = 0; j < trials_.size(); ++j) {
    trials_[j] *= keep;
    successes_[j] *= keep;
  }
  for (int32_t j = 0; j < std::min(accepted + 1, offered); ++j) trials_[j] += 1;
  for (int32_t j = 0; j < accepted; ++j) successes_[j] += 1;
}

std::vector<double> PositionAcceptance::rates(double prior) const {
  return rates(std::vector<double>(trials_.size(), prior));
}

std::vector<double> PositionAcceptance::rates(std::span<const double> prior) const {
  SSD_CHECK(prior.size() == trials_.size(), "acceptance: {} prior rates for {} positions",
            prior.size(), trials_.size());
  std::vector<double> r(trials_.size());
  for (size_t j = 0; j < r.size(); ++j)
    r[j] = (successes_[j] + kPriorTrials * prior[j]) / (trials_[j] + kPriorTrials);
  return r;
}

SpecLengthController::SpecLengthController(const SpecLengthOptions& opts)
    : opts_(opts), pooled_(opts.prior_accept, /*r_default=*/0.5), hist_(opts.k_max + 1, 0) {
  SSD_CHECK(opts.k_max >= 1 && opts.k_max <= 32, "--k-max {} must be between 1 and 32",
            opts.k_max);
  SSD_CHECK(opts.prior_accept > 0 && opts.prior_accept < 1,
            "speculation length: prior acceptance {} must be in (0, 1)", opts.prior_accept);
  SSD_CHECK(opts.probe_every >= 1, "speculation length: probe_every {} must be >= 1",
            opts.probe_every);
  for (int32_t k : opts.cycle)
    SSD_CHECK(k >= 0 && k <= opts.k_max, "speculation length: cycle length {} is outside 0..{}",
              k, opts.k_max);
}

SpecLengthController::Seq& SpecLengthController::seq(int32_t id) { return seqs_[id]; }

PositionAcceptance& SpecLengthController::of_class(std::map<int32_t, PositionAcceptance>& m,
                                                   int32_t cls) {
  return m.try_emplace(cls, opts_.k_max).first->second;
}

// Sequence id's rates in class cls: its own, pulled toward the class's over every sequence,
// pulled toward the pooled geometric rate.
std::vector<double> SpecLengthController::rates(int32_t id, int32_t cls) {
  const std::vector<double> pooled = of_class(pooled_class_, cls).rates(pooled_.a_p());
  return of_class(seq(id).accept, cls).rates(pooled);
}

void SpecLengthController::observe_class(int32_t id, int32_t cls, int32_t offered,
                                         int32_t accepted) {
  if (offered <= 0) return;
  pooled_.observe_round(offered, accepted);
  of_class(pooled_class_, cls).observe(offered, accepted);
  of_class(seq(id).accept, cls).observe(offered, accepted);
}

std::vector<int32_t> SpecLengthController::choose(std::span<const int32_t> seqs,
                                                  std::span<const int32_t> limit) {
  SSD_CHECK(seqs.size() == limit.size(), "speculation length: {} sequences, {} limits",
            seqs.size(), limit.size());
  std::vector<int32_t> cap(limit.size());
  for (size_t i = 0; i < limit.size(); ++i) cap[i] = std::clamp(limit[i], 0, opts_.k_max);
  std::vector<int32_t> k = cap;
  if (!opts_.cycle.empty()) {
    const int32_t c = opts_.cycle[static_cast<size_t>(choices_ % std::ssize(opts_.cycle))];
    for (int32_t& x : k) x = std::min(x, c);
  } else if (const bool hopeless = opts_.automatic && drafting_cannot_pay(cap);
             opts_.automatic && (!costs_.ready() || warmup_rounds_ < kWarmupRounds) &&
             !hopeless) {
    // Warm-up: K, 1 and 0 in turn, so the verify curve sees three row counts, the plain decode
    // step's among them, each several times.
    const int64_t phase = warmup_rounds_++ % 3;
    if (phase > 0)
      for (int32_t& x : k) x = std::min<int32_t>(x, phase == 1 ? 1 : 0);
  } else if (opts_.automatic) {  // (hopeless: no probes either)
    std::vector<std::vector<double>> rates;
    for (size_t i = 0; i < seqs.size(); ++i)  // no class for a sequence that cannot draft
      rates.push_back(cap[i] > 0 ? this->rates(seqs[i], cap[i])
                                 : std::vector<double>(static_cast<size_t>(opts_.k_max), 0.0));
    k = choose_lengths(rates, cap, costs_);
    for (size_t i = 0; i < k.size(); ++i) {
      Seq& s = seq(seqs[i]);
      if (++s.since_probe > opts_.probe_every && !hopeless && k[i] < cap[i]) {
        k[i] += 1;
        s.since_probe = 0;
      }
    }
  }
  ++choices_;
  for (int32_t x : k) hist_[x]++;
  for (size_t i = 0; i < seqs.size(); ++i) seq(seqs[i]).last_class = cap[i];
  return k;
}

bool SpecLengthController::drafting_cannot_pay(std::span<const int32_t> cap) const {
  if (!costs_.ready()) return false;
  const std::vector<std::vector<double>> always(cap.size(),
                                                std::vector<double>(opts_.k_max, 1.0));
  const std::vector<int32_t> k = choose_lengths(always, cap, costs_);
  return std::any_of(cap.begin(), cap.end(), [](int32_t c) { return c > 0; }) &&
         std::all_of(k.begin(), k.end(), [](int32_t x) { return x == 0; });
}

void SpecLengthController::observe_draft(int64_t tokens, double seconds) {
  costs_.draft.observe(tokens, seconds);
}

void SpecLengthController::observe_verify(int64_t rows, double seconds) {
  costs_.verify.observe(rows, seconds);
}

void SpecLengthController::observe_outcome(int32_t id, int32_t offered, int32_t accepted) {
  const int32_t cls = seq(id).last_class;
  observe_class(id, cls < 0 ? opts_.k_max : cls, offered, accepted);
}

void SpecLengthController::observe_hindsight(int32_t id, int32_t offered, int32_t accepted) {
  SSD_CHECK(offered >= 1 && offered <= opts_.k_max,
            "speculation length: an offer of {} tokens is outside 1..{}", offered, opts_.k_max);
  observe_class(id, offered, offered, accepted);
}

void SpecLengthController::finish(int32_t id) { seqs_.erase(id); }

std::string SpecLengthController::describe() const {
  const CostLine& v = costs_.verify;
  const CostLine& d = costs_.draft;
  std::string verify, draft;
  for (int64_t x = 1; x <= opts_.k_max + 1; ++x)
    verify += fmt::format("{}{:.2f}", x == 1 ? "" : " ", 1e3 * v.predict(x));
  for (int64_t x = 0; x <= opts_.k_max; ++x)
    draft += fmt::format("{}{:.2f}", x == 0 ? "" : " ", 1e3 * d.predict(x));
  return fmt::format("verify ms at 1..{} rows: {}; draft ms at 0..{} tokens: {}; pooled "
                     "acceptance {:.2f}",
                     opts_.k_max + 1, verify, opts_.k_max, draft, pooled_.a_p());
}

}  // namespace ssd
