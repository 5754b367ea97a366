// Drafter-specific calibration (topology/sim/drafter_calibration.h, hw_profile.h's DrafterFit):
// fits recover the draft times of known fits, a profile carries them through JSON, the simulator
// prices drafts and verifications with them, and bad fits are refused naming the field.
#include <gtest/gtest.h>

#include "runtime/core/error.h"
#include "topology/sim/drafter_calibration.h"
#include "topology/sim/round_sim.h"
#include "tests/unit/sim/sim_test_configs.h"

namespace ssd::sim {
namespace {

// The shared CPU-class device with a fixed cost per layer.
DeviceProfile cpu_like() {
  DeviceProfile d = cpu_like_device();
  d.layer_overhead_s = 8e-6;
  return d;
}

// Draft times of `drafter` under `truth` at k 2, 4, 7 and 1 or 4 sequences.
std::vector<DraftSample> samples_of(const SimDrafter& drafter, const DeviceProfile& truth,
                                    bool bonus) {
  std::vector<DraftSample> s;
  for (int32_t k : {2, 4, 7})
    for (double n : {1.0, 4.0}) {
      DraftSample x{.n = n, .suffix = 1.8, .k = k, .context = 140, .predict_bonus = bonus};
      x.seconds = draft_seconds(drafter, truth, x.n, x.suffix, x.k, x.context, bonus);
      s.push_back(x);
    }
  return s;
}

TEST(DrafterFit, RecoversABlockDrafterSlowerPerByteThanTheTarget) {
  SimDrafter d{model_preset("smollm2-domino")};
  DeviceProfile truth = cpu_like();
  truth.drafter_fits["smollm2-domino"] =
      DrafterFit{.mem_efficiency = 0.4, .peak_flops = 60e9, .call_s = 0.5e-3};
  const std::vector<DraftSample> s = samples_of(d, truth, false);
  const DrafterCalibration c = fit_drafter(d, cpu_like(), s);
  EXPECT_LT(c.fit.max_rel_err, 0.02);
  for (size_t i = 0; i < s.size(); ++i) EXPECT_NEAR(c.predicted_s[i] / s[i].seconds, 1, 0.02);
  // Without the fit the device prices the same calls faster (the target's figures).
  EXPECT_LT(draft_seconds(d, cpu_like(), 4, 1.8, 7, 140, false), s.back().seconds * 0.8);
}

TEST(DrafterFit, ReproducesAnAutoregressiveDraftersPerForwardAndPerCallCosts) {
  // A decode forward of a few rows is memory-bound, so its roofline and its fixed cost trade off
  // (the fit need not return the truth's split); the times it predicts must match, also at a k
  // and batch it was not fitted on.
  SimDrafter d{model_preset("smollm2-135m")};
  DeviceProfile truth = cpu_like();
  truth.drafter_fits["smollm2-135m"] =
      DrafterFit{.mem_efficiency = 0.7, .peak_flops = 40e9, .forward_s = 1.5e-3, .call_s = 2e-3};
  for (bool bonus : {false, true}) {
    const std::vector<DraftSample> s = samples_of(d, truth, bonus);
    const DrafterCalibration c = fit_drafter(d, cpu_like(), s);
    EXPECT_LT(c.fit.max_rel_err, 0.02) << bonus;
    DeviceProfile fitted = cpu_like();
    fitted.drafter_fits["smollm2-135m"] = c.fit;
    const double want = draft_seconds(d, truth, 2, 1.5, 3, 160, bonus);
    // 6%: the trade-off leaves a valley of near-equal fits that part slightly between samples
    // (4.5% seen here).
    EXPECT_NEAR(draft_seconds(d, fitted, 2, 1.5, 3, 160, bonus) / want, 1, 0.06) << bonus;
  }
}

TEST(DrafterFit, LookupCostIsPerCallPlusPerSequence) {
  SimDrafter d;
  d.shape.name = "ngram";
  d.shape.style = DraftStyle::kLookup;
  std::vector<DraftSample> s;
  for (double n : {1.0, 2.0, 4.0, 8.0}) s.push_back({.n = n, .seconds = 4e-6 + n * 3e-6});
  const DrafterCalibration c = fit_drafter(d, cpu_like(), s);
  EXPECT_NEAR(c.fit.lookup_s, 3e-6, 1e-9);
  EXPECT_NEAR(c.fit.call_s, 4e-6, 1e-9);
  DeviceProfile p = cpu_like();
  p.drafter_fits["ngram"] = c.fit;
  EXPECT_NEAR(draft_seconds(d, p, 5, 1, 4, 100, false), 4e-6 + 5 * 3e-6, 1e-12);
  // No fit: the drafter's own lookup_s (the --lookup-us default).
  EXPECT_DOUBLE_EQ(draft_seconds(d, cpu_like(), 5, 1, 4, 100, false), 5 * d.lookup_s);
  EXPECT_THROW(fit_drafter(d, cpu_like(), {}), Error);
  EXPECT_THROW(fit_drafter(d, cpu_like(), {{.n = 1, .seconds = 0}}), Error);
}

TEST(DrafterFit, VerifierHostCostIsAffineInRows) {
  DeviceProfile p = cpu_like();
  fit_verify_host(p, {{2, 30e-6 + 2 * 5e-6}, {8, 30e-6 + 8 * 5e-6}, {32, 30e-6 + 32 * 5e-6}});
  EXPECT_NEAR(p.verify_host_s, 30e-6, 1e-9);
  EXPECT_NEAR(p.verify_host_row_s, 5e-6, 1e-10);
  EXPECT_DOUBLE_EQ(verify_host_seconds(p, 10), p.verify_host_s + 10 * p.verify_host_row_s);
}

TEST(DrafterFit, ProfileCarriesFitsThroughJsonAndRefusesBadOnes) {
  DeviceProfile p = cpu_like();
  p.verify_host_s = 20e-6;
  p.verify_host_row_s = 3e-6;
  p.drafter_fits["smollm2-domino"] =
      DrafterFit{.mem_efficiency = 0.4, .peak_flops = 60e9, .forward_s = 1e-4, .call_s = 5e-4};
  p.drafter_fits["ngram"] = DrafterFit{.call_s = 4e-6, .lookup_s = 3e-6};
  const DeviceProfile back = DeviceProfile::from_json(p.to_json(), "test");
  EXPECT_DOUBLE_EQ(back.verify_host_s, 20e-6);
  EXPECT_DOUBLE_EQ(back.verify_host_row_s, 3e-6);
  ASSERT_EQ(back.drafter_fits.size(), 2u);
  EXPECT_DOUBLE_EQ(back.drafter_fits.at("smollm2-domino").peak_flops, 60e9);
  EXPECT_DOUBLE_EQ(back.drafter_fits.at("smollm2-domino").call_s, 5e-4);
  EXPECT_DOUBLE_EQ(back.drafter_fits.at("ngram").lookup_s, 3e-6);
  // The drafter's view of the device: its own efficiency, peak and per-forward cost.
  const DeviceProfile dv = back.for_drafter("smollm2-domino");
  EXPECT_DOUBLE_EQ(dv.peak("bf16"), 60e9);
  EXPECT_DOUBLE_EQ(dv.mem_efficiency, 0.4);
  EXPECT_DOUBLE_EQ(dv.overhead_s, 1e-4);
  EXPECT_DOUBLE_EQ(dv.layer_overhead_s, 0);
  EXPECT_EQ(back.drafter_fit("llama-3.2-1b"), nullptr);
  nlohmann::json bad = p.to_json();
  bad["drafter_fits"]["ngram"]["lookup_s"] = -1;
  try {
    DeviceProfile::from_json(bad, "bad.json");
    FAIL() << "a negative lookup cost was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("drafter_fits.ngram"), std::string::npos) << e.what();
  }
  bad = p.to_json();
  bad["drafter_fits"] = 3;
  EXPECT_THROW(DeviceProfile::from_json(bad, "bad.json"), Error);
  bad = p.to_json();
  bad["verify_host_s"] = -1e-6;
  EXPECT_THROW(DeviceProfile::from_json(bad, "bad.json"), Error);
}

SimConfig cpu_config() {
  SimConfig c;
  c.cluster.target_device = c.cluster.drafter_device = cpu_like();
  c.cluster.tp_link = c.cluster.drafter_link = link_preset("shm");
  c.target = model_preset("smollm2-135m");
  c.drafter.shape = model_preset("smollm2-domino");
  c.drafter.shape.style = DraftStyle::kBlock;
  c.backup.shape.style = DraftStyle::kLookup;
  c.work = {.batch = 4, .tokens = 32, .prompt = 100, .k = 4};
  c.primary.a = 0.6;
  return c;
}

TEST(DrafterFit, VerifierHostCostAddsToEveryTargetForward) {
  SimConfig c = cpu_config();
  const SimResult base = simulate(SimMode::kAr, c);
  c.cluster.target_device.verify_host_s = 50e-6;
  c.cluster.target_device.verify_host_row_s = 10e-6;
  const SimResult host = simulate(SimMode::kAr, c);
  ASSERT_EQ(host.rounds, base.rounds);
  // Every AR step decodes 4 rows: 50 + 4 x 10 us more each.
  EXPECT_NEAR(host.seconds - base.seconds, base.rounds * 90e-6, 1e-9);
}

TEST(DrafterFit, SimulatedSdUsesTheDraftersFit) {
  SimConfig c = cpu_config();
  c.cluster.colocated = true;
  const SimResult plain = simulate(SimMode::kSd, c);
  DrafterFit slow{.mem_efficiency = 0.3, .peak_flops = 30e9, .call_s = 2e-3};
  c.cluster.target_device.drafter_fits["smollm2-domino"] = slow;
  const SimResult fitted = simulate(SimMode::kSd, c);
  c.seed = 1;
  ASSERT_EQ(fitted.seq_rounds, plain.seq_rounds);  // the same sampled outcomes
  // Each round's draft costs at least the fit's 2 ms per call more.
  EXPECT_GT(fitted.seconds - plain.seconds, static_cast<double>(fitted.rounds) * 2e-3);
  EXPECT_GT(fitted.drafter_busy_s, plain.drafter_busy_s);
}

TEST(DrafterFit, ColocatedSdStartsTheDrafterOnThePromptInsideDecodeTime) {
  SimConfig c = cpu_config();
  c.cluster.colocated = true;
  c.record_events = true;
  const SimResult r = simulate(SimMode::kSd, c);
  ASSERT_FALSE(r.events.empty());
  const SimEvent& first = r.events.front();
  EXPECT_EQ(first.name, "start");
  EXPECT_DOUBLE_EQ(first.start_s, 0);
  EXPECT_NEAR(first.dur_s, draft_seconds(c.drafter, c.cluster.target_device, 4, 100, 0, 0, false),
              1e-15);
}

}  // namespace
}  // namespace ssd::sim
