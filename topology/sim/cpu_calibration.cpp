#include "topology/sim/cpu_calibration.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <utility>

#include "runtime/core/error.h"
#include "topology/sim/roofline.h"

namespace ssd::sim {
namespace {

double error_of(const DeviceProfile& d, const ModelShape& m, const std::vector<ForwardSample>& s,
                std::vector<double>* pred) {
  const LinkProfile none{"none", 0, 1};
  double e = 0;
  for (const ForwardSample& x : s) {
    const double p =
        forward_cost(m, d, 1, none, {.rows = x.rows, .seqs = x.seqs, .context = x.context})
            .total_s;
    if (pred) pred->push_back(p);
    const double r = (p - x.seconds) / x.seconds;
    e += r * r;
  }
  return e;
}


// The roofline's terms (and the cost per extra sequence) fitted to `all`, with the attention per
// cached position given.
DeviceProfile fit_terms(const std::string& name, const ModelShape& model, double bandwidth_Bps,
                        const std::vector<ForwardSample>& all, double kv_seq, double kv_row) {
  std::vector<ForwardSample> samples, batches;  // one sequence; decode batches
  for (const ForwardSample& s : all) (s.seqs > 1 ? batches : samples).push_back(s);
  SSD_CHECK(!samples.empty(), "calibration needs at least one forward time of one sequence");
  for (const ForwardSample& s : batches)
    SSD_CHECK(s.seconds > 0, "calibration: forward times must be > 0");
  SSD_CHECK(bandwidth_Bps > 0, "calibration: measured bandwidth must be > 0");
  for (const ForwardSample& s : samples)
    SSD_CHECK(s.seconds > 0 && s.rows > 0, "calibration: forward times and rows must be > 0");
  DeviceProfile d;
  d.name = name;
  d.source = "calibrated";
  d.kv_seq_pos_layer_s = kv_seq;
  d.kv_row_pos_layer_s = kv_row;
  const double t_min = std::min_element(samples.begin(), samples.end(),
                                        [](auto& a, auto& b) { return a.seconds < b.seconds; })
                           ->seconds;
  const double layers = static_cast<double>(model.n_layers);
  // Bounds the data sets: no forward computes faster than the peak, nor reads faster than the
  // achieved bandwidth, and the overhead is below the fastest forward.
  const LinkProfile none{"none", 0, 1};
  double lp_min = std::log(1e6), me_min = 0.01;
  for (const ForwardSample& x : samples) {
    const ForwardCost f =
        forward_cost(model, DeviceProfile{.name = "probe", .mem_bw_Bps = bandwidth_Bps,
                                          .peak_flops = {{"bf16", 1}}},
                     1, none, {.rows = x.rows, .seqs = 1, .context = x.context});
    lp_min = std::max(lp_min, std::log(f.flops / x.seconds));
    me_min = std::max(me_min, f.bytes / bandwidth_Bps / x.seconds);
  }
  // A forward that read its bytes faster than the measured bandwidth: the bandwidth is measured
  // by streaming a ring larger than a usual last-level cache, and a host whose cache holds much
  // of a small model's weights serves a forward faster than that. Held to the measured bandwidth,
  // the memory term would price every decode step too slow; the profile's bandwidth is then
  // twice the fastest forward's read rate (that forward also computed), and the fitted fraction
  // of it at least a half.
  if (me_min > 1) bandwidth_Bps *= 2 * me_min, me_min = 0.5;
  d.mem_bw_Bps = bandwidth_Bps;
  struct Box {
    double lo, hi;
  };
  Box lp{lp_min, std::log(1e16)}, me{me_min, 1.0}, oh{0, t_min};
  double best = 1e300, b_lp = lp.lo, b_me = 1, b_oh = 0, b_p = 0;
  auto set = [&](double l, double m, double o) {
    d.peak_flops = {{"bf16", std::exp(l)}};
    d.mem_efficiency = m;
    d.layer_overhead_s = o / layers;
  };
  // How memory and compute combine (hw_profile.h's roofline_p): each blend from the sum to the
  // max gets its own refined grid; the best fit wins.
  const Box lp0 = lp, me0 = me, oh0 = oh;
  for (double p : {1.0, 1.5, 2.0, 3.0, 4.0, 0.0}) {
    d.roofline_p = p;
    lp = lp0, me = me0, oh = oh0;
    double best_p = 1e300, p_lp = lp.lo, p_me = 1, p_oh = 0;
    for (int pass = 0; pass < 10; ++pass) {
      constexpr int kN = 24;
      for (int i = 0; i <= kN; ++i)
        for (int j = 0; j <= kN; ++j)
          for (int q = 0; q <= kN; ++q) {
            const double l = lp.lo + (lp.hi - lp.lo) * i / kN;
            const double m = me.lo + (me.hi - me.lo) * j / kN;
            const double o = oh.lo + (oh.hi - oh.lo) * q / kN;
            set(l, m, o);
            const double e = error_of(d, model, samples, nullptr);
            if (e < best_p) best_p = e, p_lp = l, p_me = m, p_oh = o;
          }
      auto shrink = [](Box b, double at, double lo, double hi) {
        const double w = (b.hi - b.lo) / 5;  // keep +-2.4 grid steps around the best point
        return Box{std::max(lo, at - w), std::min(hi, at + w)};
      };
      lp = shrink(lp, p_lp, lp_min, std::log(1e16));
      me = shrink(me, p_me, me_min, 1.0);
      oh = shrink(oh, p_oh, 0, t_min);
    }
    if (best_p < best) best = best_p, b_lp = p_lp, b_me = p_me, b_oh = p_oh, b_p = p;
  }
  d.roofline_p = b_p;
  set(b_lp, b_me, b_oh);
  d.overhead_s = 0;
  if (!batches.empty()) {
    // Each sequence beyond the first adds s per layer: s by relative least squares on what the
    // single-sequence fit leaves of each batch (>= 0). One sequence costs what it did. (It was
    // taken out of the per-layer overhead and capped by it, which a fit with no per-layer
    // overhead left at 0: batches of sequences with their own caches were priced as forks.)
    std::vector<double> left;
    error_of(d, model, batches, &left);
    double num = 0, den = 0;
    for (size_t i = 0; i < batches.size(); ++i) {
      const double w = 1 / batches[i].seconds, x = (batches[i].seqs - 1) * layers;
      num += w * w * x * (batches[i].seconds - left[i]);
      den += w * w * x * x;
    }
    d.seq_layer_overhead_s = std::max(0.0, den > 0 ? num / den : 0.0);
  }
  return d;
}

// Least squares of y over x (slope; 0 for fewer than two distinct x).
double slope_of(const std::vector<std::pair<double, double>>& xy) {
  double mx = 0, my = 0;
  for (const auto& [x, y] : xy) mx += x, my += y;
  mx /= static_cast<double>(xy.size()), my /= static_cast<double>(xy.size());
  double num = 0, den = 0;
  for (const auto& [x, y] : xy) num += (x - mx) * (y - my), den += (x - mx) * (x - mx);
  return den > 0 ? num / den : 0;
}

}  // namespace

KvSlopes fit_kv_slopes(const ModelShape& model, const DeviceProfile& d,
                       const std::vector<ForwardSample>& all) {
  std::map<std::pair<double, double>, std::vector<std::pair<double, double>>> shapes;
  for (const ForwardSample& s : all) shapes[{s.rows, s.seqs}].push_back({s.context, s.seconds});
  DeviceProfile bare = d;  // the roofline's own slope: the fitted terms without the attention
  bare.kv_seq_pos_layer_s = bare.kv_row_pos_layer_s = 0;
  const LinkProfile none{"none", 0, 1};
  const double layers = static_cast<double>(model.n_layers);
  // Normal equations of y = a x1 + b x2 over the shapes timed at more than one context.
  double s11 = 0, s12 = 0, s22 = 0, s1y = 0, s2y = 0;
  int used = 0;
  for (const auto& [shape, xy] : shapes) {
    std::set<double> contexts;
    for (const auto& [x, y] : xy) contexts.insert(x);
    if (contexts.size() < 2) continue;
    const double lo = *contexts.begin(), hi = *contexts.rbegin();
    auto roof = [&](double ctx) {
      return forward_cost(model, bare, 1, none,
                          {.rows = shape.first, .seqs = shape.second, .context = ctx})
          .total_s;
    };
    const double y = (slope_of(xy) - (roof(hi) - roof(lo)) / (hi - lo)) / layers;
    const double x1 = shape.second, x2 = shape.first;
    s11 += x1 * x1, s12 += x1 * x2, s22 += x2 * x2, s1y += x1 * y, s2y += x2 * y;
    ++used;
  }
  KvSlopes k;
  k.shapes = used;
  if (used == 0) return k;
  const double det = s11 * s22 - s12 * s12;
  if (det > 1e-12 * s11 * s22) {
    k.seq_s = (s1y * s22 - s2y * s12) / det;
    k.row_s = (s2y * s11 - s1y * s12) / det;
  }
  // Non-negative: a term the data would make negative is 0 and the other refitted alone.
  if (det <= 1e-12 * s11 * s22 || k.seq_s < 0 || k.row_s < 0) {
    const double a = std::max(0.0, s1y / s11), b = std::max(0.0, s2y / s22);
    const bool seq_alone = a * s1y >= b * s2y;  // the larger cut of the squared error
    k.seq_s = seq_alone ? a : 0;
    k.row_s = seq_alone ? 0 : b;
  }
  return k;
}

Calibration fit_device(const std::string& name, const ModelShape& model, double bandwidth_Bps,
                       const std::vector<ForwardSample>& all, double kv_seq, double kv_row) {
  SSD_CHECK(!all.empty(), "calibration needs at least one forward time of one sequence");
  // The roofline's terms are fitted at the context most samples were timed at (the others only
  // measure the attention's growth with the context, possibly at another moment's speed).
  std::map<double, int> per_context;
  for (const ForwardSample& s : all) ++per_context[s.context];
  const double main_ctx =
      std::max_element(per_context.begin(), per_context.end(),
                       [](auto& a, auto& b) { return a.second < b.second; })
          ->first;
  std::vector<ForwardSample> main;
  for (const ForwardSample& s : all)
    if (s.context == main_ctx) main.push_back(s);
  DeviceProfile d = fit_terms(name, model, bandwidth_Bps, main, kv_seq, kv_row);
  const KvSlopes k = fit_kv_slopes(model, d, all);
  if (k.shapes > 0) d = fit_terms(name, model, bandwidth_Bps, main, k.seq_s, k.row_s);
  Calibration c;
  c.profile = d;
  error_of(d, model, all, &c.predicted_s);
  std::vector<double> errs;
  for (size_t i = 0; i < all.size(); ++i)
    errs.push_back(std::abs(c.predicted_s[i] - all[i].seconds) / all[i].seconds);
  c.max_rel_err = *std::max_element(errs.begin(), errs.end());
  std::sort(errs.begin(), errs.end());
  c.median_rel_err = errs[errs.size() / 2];
  return c;
}

}  // namespace ssd::sim
