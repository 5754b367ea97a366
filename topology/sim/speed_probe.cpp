#include "topology/sim/speed_probe.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "runtime/core/error.h"
#include "runtime/core/median.h"
#include "topology/sim/roofline.h"

namespace ssd::sim {

DeviceProfile scaled_profile(const DeviceProfile& d, double s) {
  SSD_CHECK(s > 0, "speed scale must be > 0, got {}", s);
  DeviceProfile o = d;
  o.mem_bw_Bps /= s;
  for (auto& [dtype, flops] : o.peak_flops) flops /= s;
  o.overhead_s *= s;
  o.layer_overhead_s *= s;
  o.seq_layer_overhead_s *= s;
  o.kv_seq_pos_layer_s *= s;
  o.kv_row_pos_layer_s *= s;
  o.verify_host_s *= s;
  o.verify_host_row_s *= s;
  for (auto& [name, f] : o.drafter_fits) {
    f.peak_flops /= s;  // its bandwidth is a fraction of the device's, scaled above
    f.forward_s *= s;
    f.call_s *= s;
    f.lookup_s *= s;
    f.rank_row_s *= s;
    f.target_switch_s *= s;
    f.target_seq_s *= s;
  }
  return o;
}

double probe_scale(const ModelShape& model, const DeviceProfile& d,
                   const std::vector<ForwardSample>& samples) {
  SSD_CHECK(!samples.empty(), "speed probe: no samples");
  const LinkProfile none{"none", 0, 1};
  std::vector<double> r;
  for (const ForwardSample& x : samples) {
    SSD_CHECK(x.seconds > 0 && x.rows > 0 && x.seqs > 0,
              "speed probe: a sample needs seconds, rows and sequences > 0");
    const double p =
        forward_cost(model, d, 1, none, {.rows = x.rows, .seqs = x.seqs, .context = x.context})
            .total_s;
    SSD_CHECK(p > 0, "speed probe: the profile prices a forward of {} rows at 0 s", x.rows);
    r.push_back(x.seconds / p);
  }
  return median(std::move(r));
}

DrafterCalibration fit_drafter_at_speed(const SimDrafter& drafter, const DeviceProfile& profile,
                                        double s, const std::vector<DraftSample>& samples,
                                        const ModelShape* target,
                                        const std::vector<TargetSample>& verifies) {
  DeviceProfile now = scaled_profile(profile, s);
  DrafterCalibration cal = fit_drafter(drafter, now, samples);
  if (target) {
    const VerifyExtra extra = fit_verify_extra(*target, now, verifies);
    cal.fit.target_switch_s = extra.switch_s;
    cal.fit.target_seq_s = extra.seq_s;
  }
  now.drafter_fits[drafter.shape.name] = cal.fit;
  DrafterFit back = scaled_profile(now, 1 / s).drafter_fits.at(drafter.shape.name);
  back.median_rel_err = cal.fit.median_rel_err;  // of the fit, over its samples
  back.max_rel_err = cal.fit.max_rel_err;
  cal.fit = back;
  return cal;
}

std::vector<ForwardSample> read_probe_samples(const std::vector<std::string>& paths) {
  std::vector<ForwardSample> out;
  for (const std::string& path : paths) {
    std::ifstream f(path);
    SSD_CHECK(f.good(), "--speed-probe: cannot read '{}'", path);
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(f);
    } catch (const nlohmann::json::exception& e) {
      fail(fmt::format("--speed-probe: '{}' is not JSON: {}", path, e.what()));
    }
    SSD_CHECK(j.contains("samples"), "--speed-probe: '{}' has no 'samples' array", path);
    for (ForwardSample& x : probe_samples(j["samples"], fmt::format("--speed-probe: '{}'", path)))
      out.push_back(x);
  }
  return out;
}

std::vector<ForwardSample> probe_samples(const nlohmann::json& samples, const std::string& where) {
  SSD_CHECK(samples.is_array() && !samples.empty(), "{} has no 'samples' array", where);
  std::vector<ForwardSample> out;
  for (const nlohmann::json& s : samples) {
    SSD_CHECK(s.is_object() && s.contains("rows") && s.contains("median_s") &&
                  s["rows"].is_number() && s["median_s"].is_number(),
              "{}: every sample needs numeric 'rows' and 'median_s'", where);
    out.push_back({s["rows"].get<double>(), s.value("context", 0.0), s["median_s"].get<double>(),
                   s.value("seqs", 1.0)});
  }
  return out;
}

}  // namespace ssd::sim
