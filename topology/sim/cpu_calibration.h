// A device profile from measurements (`ssd simulate --calibrate`): the read bandwidth measured on
// this machine and the forward times of a model at 1..n rows, fitted to the roofline of
// roofline.h. Three numbers are fitted, minimising the squared relative error of the predicted
// forward times (a grid over all three, refined around the best point): the achieved fraction of
// the measured bandwidth, the effective peak FLOP/s and the fixed overhead. When a forward read
// its bytes faster than the measured (streamed) bandwidth, as on a host whose last-level cache
// holds much of a small model, the profile's bandwidth becomes twice that forward's read rate and
// the fraction is fitted in [1/2, 1] of it. The overhead is stored
// per layer (on a CPU it is the thread pool's hand-offs, a few per op), so a model of another
// depth (a 4-layer drafter) gets its own share. The profile then reproduces what this machine's
// kernels did, including what they lose to the ideal roofline. Samples of decode batches (one row
// of each of several sequences, each with its own cache) then give the cost per sequence beyond
// the first per layer, by least squares on what the single-sequence fit leaves of them. Forwards of
// a shape at a second context give the attention's cost per cached position (fit_kv_slopes).
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

// The attention per cached position (hw_profile.h, kv_*_pos_layer_s) from forwards of the same
// shape (rows, sequences) timed at more than one context: each shape's least-squares slope of
// seconds over the context, less the slope the profile's roofline already has (its KV bytes and
// attention FLOPs), is layers x (seqs x seq_s + rows x row_s); seq_s and row_s >= 0 by least
// squares over the shapes. `shapes`: how many shapes had two contexts (0: nothing measured).
struct KvSlopes {
  double seq_s = 0, row_s = 0;  // per layer and cached position
  int shapes = 0;
};
KvSlopes fit_kv_slopes(const ModelShape& model, const DeviceProfile& profile,
                       const std::vector<ForwardSample>& samples);

// The roofline's terms are fitted on the samples at the context most of them were timed at;
// samples of a shape at other contexts give the attention per cached position (fit_kv_slopes),
// else it is kv_seq / kv_row as given (a refit keeps the profile's). Throws ssd::Error for no
// samples, non-positive times or bandwidth.
Calibration fit_device(const std::string& name, const ModelShape& model, double bandwidth_Bps,
                       const std::vector<ForwardSample>& samples, double kv_seq = 0,
                       double kv_row = 0);

}  // namespace ssd::sim
