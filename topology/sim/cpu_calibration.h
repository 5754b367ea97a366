// A device profile from measurements (`ssd simulate --calibrate`): the read bandwidth measured on
// this machine and the forward times of a model at 1..n rows, fitted to the roofline of
// roofline.h. The bandwidth is taken as measured; the fixed overhead and the effective peak
// FLOP/s are chosen to minimise the squared relative error of the predicted forward times
// (a grid over both, refined twice), so the profile reproduces what this machine's kernels did,
// including what the kernels lose to the ideal roofline.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "topology/sim/hw_profile.h"
#include "topology/sim/model_shape.h"

namespace ssd::sim {

struct ForwardSample {
  double rows = 1;
  double context = 0;
  double seconds = 0;
};

struct Calibration {
  DeviceProfile profile;
  std::vector<double> predicted_s;  // [samples] the fitted profile's forward times
  double max_rel_err = 0, median_rel_err = 0;
};

// Throws ssd::Error for no samples, non-positive times or bandwidth.
Calibration fit_device(const std::string& name, const ModelShape& model, double bandwidth_Bps,
                       const std::vector<ForwardSample>& samples);

}  // namespace ssd::sim
