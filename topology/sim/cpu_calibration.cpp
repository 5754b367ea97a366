#include "topology/sim/cpu_calibration.h"

#include <algorithm>
#include <cmath>

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

}  // namespace

Calibration fit_device(const std::string& name, const ModelShape& model, double bandwidth_Bps,
                       const std::vector<ForwardSample>& all) {
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
  d.mem_bw_Bps = bandwidth_Bps;
  d.source = "calibrated";
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
  me_min = std::min(me_min, 1.0);
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
