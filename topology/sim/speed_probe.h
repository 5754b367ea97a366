// The machine's speed at a job's time. A calibrated CPU profile is taken once per validation rep,
// but on the shared 2-core VM the speed of the same forward moves between phases of seconds to
// minutes (the thread pool's spin or sleep hand-offs, the hypervisor, other processes): in one
// rep a 2-thread decode batch of 4 ran at 3.1 ms per step while the profile taken a minute
// earlier said 5.7 ms, and the next rep the other way round. A speed probe times a few of the
// calibration's own forward shapes (`ssd simulate --probe`, a fraction of a second) right before
// and after a measured job; the simulator then scales the whole profile by the probe's speed
// relative to the profile's prediction of the same shapes (`--speed-probe`):
//
//   s = median over the probe's samples of (measured seconds / the profile's forward of that shape)
//
// and every compute cost (target and drafter forwards, fixed and per-sequence overheads, drafter
// fits, verifier host work) takes s times as long; links are not scaled. The profile keeps the
// shape of the costs (how they grow with rows, sequences, drafted tokens), the probe sets their
// level. The same scale applies to every term: a phase that slows the target's matmuls but not a
// lookup drafter's host work would not be captured.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "topology/sim/cpu_calibration.h"
#include "topology/sim/drafter_calibration.h"
#include "topology/sim/hw_profile.h"
#include "topology/sim/model_shape.h"

namespace ssd::sim {

// The profile with every compute cost s times as long: bandwidth and FLOP/s (its own and every
// drafter fit's) divided by s, fixed costs (per forward, layer, sequence, call, lookup, ranked row,
// verification extras, verifier host work) multiplied by s. Throws ssd::Error for s <= 0.
DeviceProfile scaled_profile(const DeviceProfile& d, double s);

// s of the file comment: the median ratio of each sample's seconds to the profile's forward of its
// shape (rows, sequences, context) for `model` on one device. Throws ssd::Error for no samples or a
// sample with non-positive seconds or rows.
double probe_scale(const ModelShape& model, const DeviceProfile& d,
                   const std::vector<ForwardSample>& samples);

// A drafter's fit (fit_drafter) and, with `target`, its verification extras (fit_verify_extra)
// from runs timed while the machine ran s times the profile's time (the speed probes around
// them), returned at the profile's speed: fitted against the profile scaled by s, then the fit
// scaled by 1 / s. The calibration times the target's forwards first and each drafter after, a
// minute apart; on the shared VM the speed moved in between (a 2-thread pool's phase read as a
// 2-7 ms "verification after drafting" cost in one rep, 0.1 ms in the next), and a fit against
// the unscaled profile takes that phase for the drafter's own cost. predicted_s: the samples'
// times under the fit at speed s (comparable with the samples). Without a target the extras
// are 0. Throws what fit_drafter throws, and for s <= 0.
DrafterCalibration fit_drafter_at_speed(const SimDrafter& drafter, const DeviceProfile& profile,
                                        double s, const std::vector<DraftSample>& samples,
                                        const ModelShape* target,
                                        const std::vector<TargetSample>& verifies);

// Probe samples from JSON files written by `ssd simulate --probe` ({"samples": [{"rows", "seqs",
// "context", "median_s"}, ...]}), all files' samples together. Throws ssd::Error naming the file
// for a missing or malformed one.
std::vector<ForwardSample> read_probe_samples(const std::vector<std::string>& paths);
// The same from a probe's "samples" array already parsed (a calibration's stored probes);
// `where` names its source in errors.
std::vector<ForwardSample> probe_samples(const nlohmann::json& samples, const std::string& where);

}  // namespace ssd::sim
