// A device profile from measurements (`ssd simulate --calibrate`): the read bandwidth measured on
// this machine and the forward times of a model at 1..n rows, fitted to the roofline of
// roofline.h. Three numbers are fitted, minimising the squared relative error of the predicted
// forward times (a grid over all three, refined around the best point): the achieved fraction of
// the measured bandwidth, the effective peak FLOP/s and the fixed overhead. The overhead is stored
// per layer (on a CPU it is the thread pool's hand-offs, a few per op), so a model of another
// depth (a 4-layer drafter) gets its own share. The profile then reproduces what this machine's
// kernels did, including what they lose to the ideal roofline. Samples of decode batches (one row
// of each of several sequences, each with its own cache) then give the cost per sequence beyond
// the first per layer, by least squares on what the single-sequence fit leaves of them.
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
  double seqs = 1;  // > 1: a decode batch, one row of each of `seqs` sequences
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
