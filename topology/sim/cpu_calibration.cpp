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
        forward_cost(m, d, 1, none, {.rows = x.rows, .seqs = 1, .context = x.context}).total_s;
    if (pred) pred->push_back(p);
    const double r = (p - x.seconds) / x.seconds;
    e += r * r;
  }
  return e;
}

}  // namespace

Calibration fit_device(const std::string& name, const ModelShape& model, double bandwidth_Bps,
                       const std::vector<ForwardSample>& samples) {
  SSD_CHECK(!samples.empty(), "calibration needs at least one forward time");
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
  // Search log(peak) over [1e8, 1e16] FLOP/s and overhead over [0, t_min], refining around the
  // best point.
  double lp_lo = std::log(1e8), lp_hi = std::log(1e16), oh_lo = 0, oh_hi = t_min;
  double best = 1e300, best_lp = lp_lo, best_oh = 0;
  for (int pass = 0; pass < 4; ++pass) {
    constexpr int kN = 48;
    for (int i = 0; i <= kN; ++i)
      for (int j = 0; j <= kN; ++j) {
        const double lp = lp_lo + (lp_hi - lp_lo) * i / kN;
        const double oh = oh_lo + (oh_hi - oh_lo) * j / kN;
        d.peak_flops = {{"bf16", std::exp(lp)}};
        d.overhead_s = oh;
        const double e = error_of(d, model, samples, nullptr);
        if (e < best) best = e, best_lp = lp, best_oh = oh;
      }
    const double wl = (lp_hi - lp_lo) / 8, wo = (oh_hi - oh_lo) / 8;
    lp_lo = best_lp - wl, lp_hi = best_lp + wl;
    oh_lo = std::max(0.0, best_oh - wo), oh_hi = std::min(t_min, best_oh + wo);
  }
  d.peak_flops = {{"bf16", std::exp(best_lp)}};
  d.overhead_s = best_oh;
  Calibration c;
  c.profile = d;
  error_of(d, model, samples, &c.predicted_s);
  std::vector<double> errs;
  for (size_t i = 0; i < samples.size(); ++i)
    errs.push_back(std::abs(c.predicted_s[i] - samples[i].seconds) / samples[i].seconds);
  c.max_rel_err = *std::max_element(errs.begin(), errs.end());
  std::sort(errs.begin(), errs.end());
  c.median_rel_err = errs[errs.size() / 2];
  return c;
}

}  // namespace ssd::sim
