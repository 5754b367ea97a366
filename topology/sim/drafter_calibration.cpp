#include "topology/sim/drafter_calibration.h"

#include <algorithm>
#include <cmath>

#include "runtime/core/error.h"
#include "topology/sim/round_sim.h"
#include "topology/sim/roofline.h"

namespace ssd::sim {
namespace {

// min over x >= 0 of sum_i w_i^2 (r_i + sum_j x_j cols[j][i])^2, for up to 3 columns: the best
// unconstrained solution over every subset of the columns (the others held at 0) that is
// feasible; with the empty subset always feasible this is the non-negative optimum.
struct Ls {
  std::vector<double> x;
  double err = 0;
};
Ls nonneg_ls(const std::vector<double>& r, const std::vector<std::vector<double>>& cols,
             const std::vector<double>& w) {
  const size_t m = cols.size();
  auto err = [&](const std::vector<double>& x) {
    double e = 0;
    for (size_t i = 0; i < r.size(); ++i) {
      double v = r[i];
      for (size_t j = 0; j < m; ++j) v += x[j] * cols[j][i];
      e += w[i] * w[i] * v * v;
    }
    return e;
  };
  Ls best{std::vector<double>(m, 0), 0};
  best.err = err(best.x);
  for (unsigned mask = 1; mask < (1u << m); ++mask) {
    std::vector<size_t> on;
    for (size_t j = 0; j < m; ++j)
      if (mask & (1u << j)) on.push_back(j);
    const size_t n = on.size();
    // Normal equations A y = b over the chosen columns, by Gaussian elimination with pivoting.
    std::vector<std::vector<double>> a(n, std::vector<double>(n + 1, 0));
    for (size_t p = 0; p < n; ++p) {
      for (size_t q = 0; q < n; ++q)
        for (size_t i = 0; i < r.size(); ++i)
          a[p][q] += w[i] * w[i] * cols[on[p]][i] * cols[on[q]][i];
      for (size_t i = 0; i < r.size(); ++i) a[p][n] -= w[i] * w[i] * cols[on[p]][i] * r[i];
    }
    bool singular = false;
    for (size_t c = 0; c < n && !singular; ++c) {
      size_t piv = c;
      for (size_t p = c + 1; p < n; ++p)
        if (std::abs(a[p][c]) > std::abs(a[piv][c])) piv = p;
      std::swap(a[c], a[piv]);
      double scale = 0;
      for (size_t q = 0; q < n; ++q) scale = std::max(scale, std::abs(a[q][q]));
      if (std::abs(a[c][c]) <= 1e-12 * std::max(scale, 1e-300)) {
        singular = true;
        break;
      }
      for (size_t p = 0; p < n; ++p) {
        if (p == c) continue;
        const double f = a[p][c] / a[c][c];
        for (size_t q = c; q <= n; ++q) a[p][q] -= f * a[c][q];
      }
    }
    if (singular) continue;
    std::vector<double> x(m, 0);
    bool feasible = true;
    for (size_t p = 0; p < n; ++p) {
      x[on[p]] = a[p][n] / a[p][p];
      feasible = feasible && x[on[p]] >= 0;
    }
    if (!feasible) continue;
    const double e = err(x);
    if (e < best.err) best = {x, e};
  }
  return best;
}

void fill_errors(DrafterCalibration& c, const std::vector<DraftSample>& s) {
  std::vector<double> e;
  for (size_t i = 0; i < s.size(); ++i)
    e.push_back(std::abs(c.predicted_s[i] - s[i].seconds) / s[i].seconds);
  c.fit.max_rel_err = *std::max_element(e.begin(), e.end());
  std::sort(e.begin(), e.end());
  c.fit.median_rel_err = e[e.size() / 2];
}

bool has_priced_start(const SimDrafter& drafter, const DraftSample& s) {
  return s.start_s < 0 && s.start_seqs > 0 && s.start_prompt > 0 &&
         drafter.shape.style != DraftStyle::kLookup;
}

// The start's forward alone (no call cost: it rides in the run's first call), per call; a
// measured start as measured.
double start_share(const SimDrafter& drafter, const DeviceProfile& device, const DraftSample& s) {
  if (s.start_s >= 0) return s.start_s / std::max(1.0, s.calls);
  if (!has_priced_start(drafter, s)) return 0;
  const DrafterFit* fit = device.drafter_fit(drafter.shape.name);
  const double call = fit ? fit->call_s : 0;
  return (draft_seconds(drafter, device, s.start_seqs, s.start_prompt, 0, 0, false) - call) /
         std::max(1.0, s.calls);
}

}  // namespace

double sample_seconds(const SimDrafter& drafter, const DeviceProfile& device,
                      const DraftSample& s) {
  return draft_seconds(drafter, device, s.n, s.suffix, s.k, s.context, s.predict_bonus,
                       s.kv_seqs) +
         start_share(drafter, device, s);
}

DrafterCalibration fit_drafter(const SimDrafter& drafter, const DeviceProfile& device,
                               const std::vector<DraftSample>& samples) {
  SSD_CHECK(!samples.empty(), "drafter calibration of {} needs at least one measured round",
            drafter.shape.name);
  for (const DraftSample& s : samples)
    SSD_CHECK(s.seconds > 0 && s.n > 0,
              "drafter calibration of {}: draft times and sequences must be > 0",
              drafter.shape.name);
  const std::string& name = drafter.shape.name;
  std::vector<double> w, one, r(samples.size()), f(samples.size()), ranked(samples.size());
  for (const DraftSample& s : samples) {
    w.push_back(1 / s.seconds);
    one.push_back(1);
  }
  DrafterCalibration out;
  if (drafter.shape.style == DraftStyle::kLookup) {
    for (size_t i = 0; i < samples.size(); ++i) {
      r[i] = -samples[i].seconds;
      f[i] = samples[i].n;
    }
    const Ls ls = nonneg_ls(r, {f, one}, w);
    out.fit.lookup_s = ls.x[0];
    out.fit.call_s = ls.x[1];
  } else {
    // The roofline part of every sample under (efficiency, peak) with no fixed costs, and the
    // forwards per call (the per-forward cost's weight).
    DeviceProfile probe = device;
    probe.drafter_fits.clear();
    auto roof = [&](double me, double peak, const DraftSample& s) {
      probe.drafter_fits[name] = DrafterFit{.mem_efficiency = me, .peak_flops = peak};
      return sample_seconds(drafter, probe, s);
    };
    // The start's forward adds 1 / calls forwards per call. Calls that rank their rows (SSD's
    // requests, predict_bonus) pay rank_row_s per drafted row.
    for (size_t i = 0; i < samples.size(); ++i) {
      const DraftSample& s = samples[i];
      ranked[i] = s.predict_bonus ? s.n * (s.k + 1) : 0;
      f[i] = drafter.shape.style == DraftStyle::kBlock
                 ? 0
                 : std::max(1, s.k + (s.predict_bonus ? 1 : 0)) +
                       (has_priced_start(drafter, s) ? 1 / std::max(1.0, s.calls) : 0);
    }
    struct Box {
      double lo, hi;
    };
    Box lp{std::log(1e8), std::log(1e15)}, me{0.01, 1.0};
    DrafterFit best;
    double best_err = 1e300;
    // A fine first grid (the roofline's max() makes the error surface have local minima), then
    // refinements within two steps of the best point.
    for (int pass = 0; pass < 8; ++pass) {
      const int n = pass == 0 ? 48 : 16;
      for (int i = 0; i <= n; ++i)
        for (int j = 0; j <= n; ++j) {
          const double l = lp.lo + (lp.hi - lp.lo) * i / n;
          const double m = me.lo + (me.hi - me.lo) * j / n;
          for (size_t q = 0; q < samples.size(); ++q)
            r[q] = roof(m, std::exp(l), samples[q]) - samples[q].seconds;
          const Ls ls = nonneg_ls(r, {f, one, ranked}, w);
          if (ls.err < best_err) {
            best_err = ls.err;
            best = DrafterFit{.mem_efficiency = m, .peak_flops = std::exp(l), .forward_s = ls.x[0],
                              .call_s = ls.x[1], .rank_row_s = ls.x[2]};
          }
        }
      auto around = [n](Box b, double at, double lo, double hi) {
        const double step = (b.hi - b.lo) / n;
        return Box{std::max(lo, at - 2 * step), std::min(hi, at + 2 * step)};
      };
      lp = around(lp, std::log(best.peak_flops), std::log(1e8), std::log(1e15));
      me = around(me, best.mem_efficiency, 0.01, 1.0);
    }
    out.fit = best;
  }
  DeviceProfile fitted = device;
  fitted.drafter_fits[name] = out.fit;
  for (const DraftSample& s : samples) out.predicted_s.push_back(sample_seconds(drafter, fitted, s));
  fill_errors(out, samples);
  return out;
}

VerifyExtra fit_verify_extra(const ModelShape& target, const DeviceProfile& device,
                             const std::vector<TargetSample>& samples) {
  if (samples.empty()) return {};
  const LinkProfile none{"none", 0, 1};
  std::vector<double> r, one, extra_seqs, w;
  for (const TargetSample& s : samples) {
    r.push_back(forward_cost(target, device, 1, none,
                             {.rows = s.rows, .seqs = s.seqs, .context = s.context})
                    .total_s -
                s.seconds);
    one.push_back(1);
    extra_seqs.push_back(std::max(0.0, s.seqs - 1));
    w.push_back(1);
  }
  const Ls ls = nonneg_ls(r, {one, extra_seqs}, w);
  return {ls.x[0], ls.x[1]};
}

void fit_verify_host(DeviceProfile& device, const std::vector<std::pair<double, double>>& samples) {
  SSD_CHECK(!samples.empty(), "the verifier's host cost needs at least one measured round");
  std::vector<double> r, rows, one, w;
  for (const auto& [n, s] : samples) {
    SSD_CHECK(n > 0 && s >= 0, "verifier host cost: rows must be > 0 and seconds >= 0");
    r.push_back(-s);
    rows.push_back(n);
    one.push_back(1);
    w.push_back(1 / std::max(s, 1e-6));
  }
  const Ls ls = nonneg_ls(r, {rows, one}, w);
  device.verify_host_row_s = ls.x[0];
  device.verify_host_s = ls.x[1];
}

}  // namespace ssd::sim
