// The speed probe (topology/sim/speed_probe.h): a profile scaled by s prices every forward, draft
// and SD round s times as long; the probe's scale recovers the speed of a machine that runs s
// times slower than the profile, robust to one disturbed sample; bad input is refused by name.
#include <gtest/gtest.h>

#include <fstream>

#include "runtime/core/error.h"
#include "tests/support/temp_dir.h"
#include "tests/unit/sim/sim_test_configs.h"
#include "topology/sim/roofline.h"
#include "topology/sim/round_sim.h"
#include "topology/sim/speed_probe.h"

namespace ssd::sim {
namespace {

// A calibrated-like profile with every term the scale must reach: p-norm roofline, fixed costs
// per forward, layer and sequence, the verifier's host work, and drafter fits.
DeviceProfile calibrated_like() {
  DeviceProfile d = cpu_like_device();
  d.roofline_p = 2;
  d.overhead_s = 0.1e-3;
  d.layer_overhead_s = 20e-6;
  d.seq_layer_overhead_s = 5e-6;
  d.verify_host_s = 30e-6;
  d.verify_host_row_s = 3e-6;
  d.drafter_fits["smollm2-domino"] =
      DrafterFit{.mem_efficiency = 0.5, .peak_flops = 70e9, .forward_s = 0.2e-3, .call_s = 0.6e-3,
                 .rank_row_s = 40e-6, .target_switch_s = 0.5e-3, .target_seq_s = 0.3e-3};
  d.drafter_fits["ngram"] = DrafterFit{.call_s = 4e-6, .lookup_s = 3e-6};
  return d;
}

const LinkProfile kNone{"none", 0, 1};

TEST(SpeedProbe, AScaledProfilePricesEveryForwardAndDraftThatManyTimesAsLong) {
  DeviceProfile d = calibrated_like();
  d.kv_seq_pos_layer_s = 0.09e-6;  // the cache's attention is scaled too
  d.kv_row_pos_layer_s = 0.03e-6;
  const DeviceProfile slow = scaled_profile(d, 1.6);
  const ModelShape t = model_preset("smollm2-135m");
  for (ForwardWork w : {ForwardWork{1, 1, 128}, ForwardWork{12, 1, 128}, ForwardWork{4, 4, 128},
                        ForwardWork{32, 4, 300}}) {
    const double base = forward_cost(t, d, 1, kNone, w).total_s;
    EXPECT_NEAR(forward_cost(t, slow, 1, kNone, w).total_s, 1.6 * base, 1e-12 + 1e-9 * base);
  }
  const SimDrafter domino{model_preset("smollm2-domino")};
  SimDrafter ngram;
  ngram.shape.name = "ngram";
  ngram.shape.style = DraftStyle::kLookup;
  for (const SimDrafter* dr : {&domino, static_cast<const SimDrafter*>(&ngram)})
    for (bool bonus : {false, true}) {
      const double base = draft_seconds(*dr, d, 4, 2.5, 4, 150, bonus);
      EXPECT_GT(base, 0);
      EXPECT_NEAR(draft_seconds(*dr, slow, 4, 2.5, 4, 150, bonus), 1.6 * base, 1e-9 * base);
    }
  EXPECT_THROW(scaled_profile(d, 0), Error);
  EXPECT_THROW(scaled_profile(d, -1), Error);
}

TEST(SpeedProbe, AColocatedSdRunTakesThatManyTimesAsLongWithTheSameRounds) {
  // One process, no link: every second of an SD run is compute, so all of it scales.
  SimConfig c;
  c.cluster.target_device = c.cluster.drafter_device = calibrated_like();
  c.cluster.colocated = true;
  c.target = model_preset("smollm2-135m");
  c.drafter.shape = model_preset("smollm2-domino");
  c.backup.shape.style = DraftStyle::kLookup;
  c.work = {.batch = 4, .tokens = 32, .prompt = 100, .k = 4};
  c.primary.a = 0.6;
  const SimResult base = simulate(SimMode::kSd, c);
  c.cluster.target_device = scaled_profile(c.cluster.target_device, 0.7);
  c.cluster.drafter_device = scaled_profile(c.cluster.drafter_device, 0.7);
  const SimResult fast = simulate(SimMode::kSd, c);
  ASSERT_EQ(fast.rounds, base.rounds);
  EXPECT_EQ(fast.tokens, base.tokens);
  EXPECT_NEAR(fast.seconds, 0.7 * base.seconds, 1e-9 * base.seconds);
}

TEST(SpeedProbe, TheScaleRecoversTheMachinesSpeedDespiteOneDisturbedSample) {
  const DeviceProfile d = calibrated_like();
  const ModelShape t = model_preset("smollm2-135m");
  const DeviceProfile now = scaled_profile(d, 1.35);  // the machine in a slower phase
  std::vector<ForwardSample> s;
  for (ForwardWork w : {ForwardWork{1, 1, 128}, ForwardWork{12, 1, 128}, ForwardWork{4, 4, 128}})
    s.push_back({w.rows, w.context, forward_cost(t, now, 1, kNone, w).total_s, w.seqs});
  EXPECT_NEAR(probe_scale(t, d, s), 1.35, 1e-9);
  s[1].seconds *= 3;  // one sample hit by a burst of other work: the median ignores it
  EXPECT_NEAR(probe_scale(t, d, s), 1.35, 1e-9);
  EXPECT_NEAR(probe_scale(t, now, {s[0], s[2]}), 1.0, 1e-9);  // the even count's middle pair
  EXPECT_THROW(probe_scale(t, d, {}), Error);
  EXPECT_THROW(probe_scale(t, d, {{1, 128, 0, 1}}), Error);
}

TEST(SpeedProbe, ADrafterTimedInASlowerPhaseIsFittedAtTheProfilesSpeed) {
  // The target's forwards were timed in one phase (the profile); the drafter's SD runs and their
  // verifications a minute later while the machine ran 1.5x slower (its probes say 1.5). Fitted
  // at that speed and scaled back, the drafter's costs and the verification extras are the
  // truth's; fitted against the unscaled profile, the phase reads as a large extra cost.
  const DeviceProfile profile = calibrated_like();
  DeviceProfile truth = profile;  // the drafter's true costs at the profile's speed
  const SimDrafter domino{model_preset("smollm2-domino")};
  const DrafterFit want{.mem_efficiency = 0.5, .peak_flops = 70e9, .call_s = 0.6e-3,
                        .target_switch_s = 0.4e-3, .target_seq_s = 0.3e-3};
  truth.drafter_fits["smollm2-domino"] = want;
  const DeviceProfile slow = scaled_profile(truth, 1.5);
  std::vector<DraftSample> samples;
  for (int32_t k : {2, 4, 7})
    for (double n : {1.0, 4.0}) {
      DraftSample x{.n = n, .suffix = 1.8, .k = k, .context = 140};
      x.seconds = draft_seconds(domino, slow, x.n, x.suffix, x.k, x.context, false);
      samples.push_back(x);
    }
  const ModelShape t = model_preset("smollm2-135m");
  const DrafterFit& slow_fit = slow.drafter_fits.at("smollm2-domino");
  std::vector<TargetSample> verifies;
  for (double seqs : {1.0, 4.0})
    for (double rows : {3.0, 5.0, 8.0}) {
      const ForwardWork w{rows * seqs, seqs, 140};
      verifies.push_back({w.rows, seqs, 140,
                          forward_cost(t, slow, 1, kNone, w).total_s + slow_fit.target_switch_s +
                              (seqs - 1) * slow_fit.target_seq_s});
    }
  const DrafterCalibration at = fit_drafter_at_speed(domino, profile, 1.5, samples, &t, verifies);
  EXPECT_LT(at.fit.max_rel_err, 0.02);
  for (size_t i = 0; i < samples.size(); ++i)
    EXPECT_NEAR(at.predicted_s[i] / samples[i].seconds, 1, 0.02);  // at the samples' speed
  EXPECT_NEAR(at.fit.target_switch_s, want.target_switch_s, 1e-9);
  EXPECT_NEAR(at.fit.target_seq_s, want.target_seq_s, 1e-9);
  DeviceProfile fitted = profile;
  fitted.drafter_fits["smollm2-domino"] = at.fit;
  const double truth_s = draft_seconds(domino, truth, 4, 2, 5, 160, false);
  EXPECT_NEAR(draft_seconds(domino, fitted, 4, 2, 5, 160, false) / truth_s, 1, 0.02);
  // Against the unscaled profile the slower phase becomes the drafter's and the verification's
  // own cost: a verification of 4 sequences' 5 rows is priced far above the truth.
  const DrafterCalibration naive = fit_drafter_at_speed(domino, profile, 1, samples, &t, verifies);
  const double extra_naive = naive.fit.target_switch_s + 3 * naive.fit.target_seq_s;
  const double extra_truth = want.target_switch_s + 3 * want.target_seq_s;
  EXPECT_GT(extra_naive, 2 * extra_truth);
  EXPECT_THROW(fit_drafter_at_speed(domino, profile, 0, samples, &t, verifies), Error);
}

TEST(SpeedProbe, ReadsProbeFilesAndNamesAMalformedOne) {
  test::TempDir dir;
  std::ofstream(dir.file("a.json"))
      << R"({"samples": [{"rows": 1, "seqs": 1, "context": 128, "median_s": 0.003},
                         {"rows": 4, "seqs": 4, "context": 128, "median_s": 0.005}]})";
  std::ofstream(dir.file("b.json")) << R"({"samples": [{"rows": 12, "median_s": 0.009}]})";
  const std::vector<ForwardSample> s = read_probe_samples({dir.file("a.json"), dir.file("b.json")});
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[1].seqs, 4);
  EXPECT_EQ(s[1].context, 128);
  EXPECT_EQ(s[2].rows, 12);
  EXPECT_EQ(s[2].seqs, 1);
  std::ofstream(dir.file("bad.json")) << R"({"samples": [{"rows": 1}]})";
  std::ofstream(dir.file("text.json")) << "not json";
  for (const char* f : {"bad.json", "text.json", "missing.json"}) {
    try {
      read_probe_samples({dir.file(f)});
      ADD_FAILURE() << f << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(f), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace ssd::sim
