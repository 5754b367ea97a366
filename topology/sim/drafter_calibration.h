// A drafter's own costs from measured draft calls (`ssd simulate --calibrate
// --calibrate-drafters`): the runtime's SD loop is timed with that drafter at several k and
// batch sizes, each run giving the mean seconds of one round's drafting (the draft call, then the
// commit of the outcome), and fit_drafter() finds the DrafterFit (hw_profile.h) under which
// draft_seconds() (round_sim.h) reproduces them:
//   model drafters  a grid over the achieved bandwidth fraction and peak (refined around the
//                   best point); for each, the per-forward and per-call costs are the
//                   non-negative least-squares solution (the cost is linear in them), all
//                   minimising the squared relative error. A block drafter has one forward per
//                   call, so its fixed cost is all per-call.
//   lookup drafters call_s + n x lookup_s, by the same least squares.
// A model or block drafter starts lazily: its first draft call of a sequence forwards the whole
// prompt (model_draft_runner.h's catch-up; Domino likewise). That forward is inside the timed
// drafting of a calibration run, so a sample carries it (start_seqs x start_prompt rows, spread
// over the run's `calls`) and the fit prices it as the forward it is rather than folding it into
// the per-call cost (which made a short run's rounds look ~60% dearer than a long run's).
// Priced so, the start's forward (128 rows and more, past the 32 rows the target's forwards were
// timed at) was an extrapolation the fit traded against the rounds' small forwards: the model
// drafter's fit priced a 1-row forward at 2.7 ms where the target profile's own was 3.4 ms, and a
// drafter rank's SD drafting at k 2 and 7 30-42% below a job's (docs/simulator.md, sim10). So the
// calibration now times the start itself (one call over each batch's prompts: the runner's
// catch-up and its first logits row, `start_s`) and a run's sample takes its measured share
// instead; the start calls join the fit as samples of their own, so the simulator's start on a
// job's prompt is priced from a measured start.
#pragma once

#include <cstdint>
#include <vector>

#include "topology/sim/hw_profile.h"
#include "topology/sim/sim_config.h"

namespace ssd::sim {

// One measured configuration: the mean draft call of a run.
struct DraftSample {
  double n = 1;       // sequences (or branches) per call
  double suffix = 1;  // new tokens each takes in (the last round's accepted + 1)
  int32_t k = 4;      // tokens drafted per sequence
  double context = 0;
  bool predict_bonus = false;  // a drafter rank drafts k + 1 (round_sim.h)
  double seconds = 0;          // measured, per call
  // The lazy start inside the timed drafting: one forward over start_seqs x start_prompt rows,
  // spread over `calls` calls (0 sequences: none; a lookup drafter indexes eagerly).
  double start_seqs = 0, start_prompt = 0, calls = 1;
  // >= 0: the start's measured seconds (all of it, over the calls), priced as measured.
  double start_s = -1;
  // Distinct sequences whose cached prefixes the call reads (-1: n). A pre-speculation call
  // drafts n branches of kv_seqs sequences as one tree-masked batch (round_sim.h).
  double kv_seqs = -1;
};

// What `s` is predicted to cost per call under `device`'s fit for `drafter`: draft_seconds() of
// the call plus its share of the lazy start.
double sample_seconds(const SimDrafter& drafter, const DeviceProfile& device, const DraftSample& s);

struct DrafterCalibration {
  DrafterFit fit;
  std::vector<double> predicted_s;  // [samples] under the fit
};

// `device` supplies the measured bandwidth (and the peak a lookup drafter never uses). Throws
// ssd::Error for no samples or a non-positive time.
DrafterCalibration fit_drafter(const SimDrafter& drafter, const DeviceProfile& device,
                               const std::vector<DraftSample>& samples);

// A verification forward timed inside a drafter's SD run: its rows (over `seqs` sequences) at
// `context`, and its mean seconds.
struct TargetSample {
  double rows = 1, seqs = 1, context = 0, seconds = 0;
};
// DrafterFit::target_switch_s and target_seq_s: what the SD rounds' verification forwards took
// beyond the profile's forward of the same rows (warm, back to back), fitted as
// switch + (seqs - 1) x seq by non-negative least squares (both >= 0).
struct VerifyExtra {
  double switch_s = 0, seq_s = 0;
};
VerifyExtra fit_verify_extra(const ModelShape& target, const DeviceProfile& device,
                             const std::vector<TargetSample>& samples);

// The verifier's host cost per forward, host_s = verify_host_s + rows x verify_host_row_s, by
// non-negative least squares over (rows, seconds) pairs; sets both fields of `device`.
void fit_verify_host(DeviceProfile& device, const std::vector<std::pair<double, double>>& samples);

}  // namespace ssd::sim
