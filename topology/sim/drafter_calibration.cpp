#include "topology/sim/drafter_calibration.h"

#include <algorithm>
#include <cmath>

#include "runtime/core/error.h"
#include "topology/sim/round_sim.h"

namespace ssd::sim {
namespace {

// min over a, c >= 0 of sum w_i^2 (r_i + a f_i + c g_i)^2: the unconstrained solution when it is
// feasible, else the best of the faces (one of them 0).
struct Ls {
  double a = 0, c = 0, err = 0;
};
Ls nonneg_ls(const std::vector<double>& r, const std::vector<double>& f,
             const std::vector<double>& g, const std::vector<double>& w) {
  double ff = 0, fg = 0, gg = 0, rf = 0, rg = 0;
  for (size_t i = 0; i < r.size(); ++i) {
    const double w2 = w[i] * w[i];
    ff += w2 * f[i] * f[i];
    fg += w2 * f[i] * g[i];
    gg += w2 * g[i] * g[i];
    rf += w2 * r[i] * f[i];
    rg += w2 * r[i] * g[i];
  }
  auto err = [&](double a, double c) {
    double e = 0;
    for (size_t i = 0; i < r.size(); ++i) {
      const double x = w[i] * (r[i] + a * f[i] + c * g[i]);
      e += x * x;
    }
    return e;
  };
  std::vector<Ls> cand{{0, 0, 0}};
  if (ff > 0) cand.push_back({std::max(0.0, -rf / ff), 0, 0});
  if (gg > 0) cand.push_back({0, std::max(0.0, -rg / gg), 0});
  const double det = ff * gg - fg * fg;
  if (det > 1e-12 * ff * gg) {
    const double a = (-rf * gg + rg * fg) / det, c = (-rg * ff + rf * fg) / det;
    if (a >= 0 && c >= 0) cand.push_back({a, c, 0});
  }
  Ls best{0, 0, 1e300};
  for (Ls& x : cand) {
    x.err = err(x.a, x.c);
    if (x.err < best.err) best = x;
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

}  // namespace

DrafterCalibration fit_drafter(const SimDrafter& drafter, const DeviceProfile& device,
                               const std::vector<DraftSample>& samples) {
  SSD_CHECK(!samples.empty(), "drafter calibration of {} needs at least one measured round",
            drafter.shape.name);
  for (const DraftSample& s : samples)
    SSD_CHECK(s.seconds > 0 && s.n > 0,
              "drafter calibration of {}: draft times and sequences must be > 0",
              drafter.shape.name);
  const std::string& name = drafter.shape.name;
  std::vector<double> w, one, r(samples.size()), f(samples.size());
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
    const Ls ls = nonneg_ls(r, f, one, w);
    out.fit.lookup_s = ls.a;
    out.fit.call_s = ls.c;
  } else {
    // The roofline part of every sample under (efficiency, peak) with no fixed costs, and the
    // forwards per call (the per-forward cost's weight).
    DeviceProfile probe = device;
    probe.drafter_fits.clear();
    auto roof = [&](double me, double peak, const DraftSample& s) {
      probe.drafter_fits[name] = DrafterFit{.mem_efficiency = me, .peak_flops = peak};
      return draft_seconds(drafter, probe, s.n, s.suffix, s.k, s.context, s.predict_bonus);
    };
    for (size_t i = 0; i < samples.size(); ++i)
      f[i] = drafter.shape.style == DraftStyle::kBlock
                 ? 0
                 : std::max(1, samples[i].k + (samples[i].predict_bonus ? 1 : 0));
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
          const Ls ls = nonneg_ls(r, f, one, w);
          if (ls.err < best_err) {
            best_err = ls.err;
            best = DrafterFit{.mem_efficiency = m, .peak_flops = std::exp(l), .forward_s = ls.a,
                              .call_s = ls.c};
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
  for (const DraftSample& s : samples)
    out.predicted_s.push_back(
        draft_seconds(drafter, fitted, s.n, s.suffix, s.k, s.context, s.predict_bonus));
  fill_errors(out, samples);
  return out;
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
  const Ls ls = nonneg_ls(r, rows, one, w);
  device.verify_host_row_s = ls.a;
  device.verify_host_s = ls.c;
}

}  // namespace ssd::sim
