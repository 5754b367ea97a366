// The runtime mechanisms the round simulator mirrors beyond the roofline (round_sim.h,
// drafter_calibration.h): the leader's pre-speculation switch, decode steps, the drafter's miss
// policy learnt online, the drafter's start on the prompt, a batch of pre-speculated branches in
// one call, and a calibration run's lazy prompt catch-up.
#include <algorithm>
#include <gtest/gtest.h>

#include <fstream>

#include "runtime/core/error.h"
#include "tests/support/temp_dir.h"
#include "topology/sim/drafter_calibration.h"
#include "topology/sim/round_sim.h"
#include "topology/sim/roofline.h"

namespace ssd::sim {
namespace {

SimConfig h100_config() {
  SimConfig c;
  c.cluster.target_device = c.cluster.drafter_device = device_preset("h100-sxm");
  c.cluster.tp = 4;
  c.cluster.tp_link = c.cluster.drafter_link = link_preset("nvlink4");
  c.target = model_preset("llama-3.1-70b");
  c.drafter.shape = model_preset("llama-3.2-1b");
  c.backup.shape.style = DraftStyle::kLookup;
  c.work = {.batch = 4, .tokens = 64, .prompt = 100, .k = 4};
  c.primary.a = 0.75;
  c.backup_acc.a = 0.2;
  return c;
}

// A trace of `rounds` rounds of `batch` sequences, each accepting all k, every lookup a miss,
// with the given pre-speculation regime (nullopt: not recorded).
std::vector<OutcomeRecord> trace_of(int32_t rounds, int32_t batch, int32_t k,
                                    std::optional<bool> prespec) {
  std::vector<OutcomeRecord> t;
  for (int32_t r = 0; r < rounds; ++r)
    for (int32_t s = 0; s < batch; ++s) {
      OutcomeRecord o{.round = r, .seq = s, .k = k, .accepted = k};
      if (r + 1 < rounds) o.hit = false;
      o.prespec = prespec;
      t.push_back(o);
    }
  return t;
}

TEST(PrespecSwitch, TheTracesRecordedRegimeDecidesWhetherBranchesAreDrafted) {
  const SimConfig c = h100_config();
  const std::vector<OutcomeRecord> off = trace_of(10, 2, 4, false), on = trace_of(10, 2, 4, true);
  const SimResult r_off = simulate(SimMode::kSsd, c, &off);
  const SimResult r_on = simulate(SimMode::kSsd, c, &on);
  EXPECT_EQ(r_off.branches_planned, 0);
  EXPECT_EQ(r_off.branches_drafted, 0);
  EXPECT_GT(r_on.branches_drafted, 0);
  EXPECT_LT(r_off.drafter_busy_s, r_on.drafter_busy_s);
  EXPECT_EQ(r_off.tokens, r_on.tokens);
}

TEST(PrespecSwitch, TheFieldSurvivesTheTraceFormatAndBadValuesAreRefused) {
  OutcomeRecord r{.round = 2, .seq = 1, .k = 3, .accepted = 1, .hit = true, .prespec = false};
  const OutcomeRecord back = parse_outcome_line(to_jsonl_line(r), "t:1");
  ASSERT_TRUE(back.prespec.has_value());
  EXPECT_FALSE(*back.prespec);
  EXPECT_FALSE(parse_outcome_line(R"({"round":0,"seq":0,"k":1,"accepted":0})", "t:1").prespec);
  try {
    parse_outcome_line(R"({"round":0,"seq":0,"k":1,"accepted":0,"prespec":3})", "t.jsonl:7");
    FAIL() << "a non-boolean prespec was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("t.jsonl:7"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("prespec"), std::string::npos) << e.what();
  }
}

TEST(PrespecSwitch, TheAdaptiveSwitchRunsOffBlocksInItsWarmUp) {
  // The runtime's switch alternates on, off, on, off blocks of 16 rounds before choosing: a run
  // of 4 blocks pre-speculates in about half of its rounds, a run with the switch off in all.
  SimConfig c = h100_config();
  c.work = {.batch = 1, .tokens = 64 * 5, .prompt = 100, .k = 4};
  const std::vector<OutcomeRecord> unknown = trace_of(64, 1, 4, std::nullopt);
  const SimResult always = simulate(SimMode::kSsd, c, &unknown);
  c.ssd.adaptive_switch = true;
  const SimResult adaptive = simulate(SimMode::kSsd, c, &unknown);
  const auto per_round = static_cast<double>(always.branches_planned) / 64.0;
  ASSERT_GT(per_round, 0);
  EXPECT_NEAR(static_cast<double>(adaptive.branches_planned) / per_round, 32, 1.0);
}

TEST(DecodeSteps, NothingIsPreSpeculatedAfterALengthOfZero) {
  // Sequence 0 is offered k = 4, sequence 1 a decode step (k = 0) in every round.
  std::vector<OutcomeRecord> t;
  for (int32_t r = 0; r < 6; ++r) {
    t.push_back({.round = r, .seq = 0, .k = 4, .accepted = 4, .hit = false, .prespec = true});
    t.push_back({.round = r, .seq = 1, .k = 0, .accepted = 0, .prespec = true});
  }
  const SimConfig c = h100_config();
  const SimResult both = simulate(SimMode::kSsd, c, &t);
  std::vector<OutcomeRecord> alone;
  for (const OutcomeRecord& o : t)
    if (o.seq == 0) alone.push_back(o);
  const SimResult one = simulate(SimMode::kSsd, c, &alone);
  EXPECT_EQ(both.branches_planned, one.branches_planned);
  EXPECT_GT(one.branches_planned, 0);
}

TEST(MissPolicy, StartsAtItsDefaultAndLearnsTheBackupWhenDraftsAreDear) {
  // A primary whose every call costs a second: the drafter's policy answers the first misses
  // with it (b* defaults to 4 >= batch 4), measures it, and turns to the backup.
  SimConfig c = h100_config();
  c.cluster.drafter_device.drafter_fits["llama-3.2-1b"] =
      DrafterFit{.mem_efficiency = 0.8, .peak_flops = 500e12, .call_s = 1.0};
  c.primary.miss_at_1 = 0.9;  // most bonuses outside the plan: misses every round
  const AcceptanceParams worse = c.backup_acc;
  c.backup_acc = c.primary;  // a backup accepted better than the primary's sampled rounds
  c.backup_acc.per_position.clear();
  c.backup_acc.a = std::min(1.0, c.primary.at(1) + 0.15);
  const SimResult r = simulate(SimMode::kSsd, c);
  ASSERT_GT(r.misses, 12);
  EXPECT_GT(r.fallback_primary, 0);
  EXPECT_LE(r.fallback_primary, 3 * 4);  // min_samples primary drafts of at most 4 sequences
  EXPECT_GT(r.fallback_backup, 0);
  EXPECT_LT(r.b_star, 4);
  // A backup accepted less than the primary: the derivation still takes it when the primary's
  // drafts are this dear; --miss-policy not-worse never does.
  SimConfig w = c;
  w.backup_acc = worse;
  ASSERT_LT(worse.expected_tokens(4), c.primary.expected_tokens(4));
  EXPECT_GT(simulate(SimMode::kSsd, w).fallback_backup, 0);
  w.ssd.miss = MissChoice::kNotWorse;
  EXPECT_EQ(simulate(SimMode::kSsd, w).fallback_backup, 0);
  // A fixed b* is obeyed from the first round.
  c.ssd.b_star = 0;
  EXPECT_EQ(simulate(SimMode::kSsd, c).fallback_primary, 0);
}

TEST(DrafterStart, EveryPlacementStartsTheDrafterOnThePromptBeforeRoundZero) {
  for (SimMode mode : {SimMode::kSd, SimMode::kSsd}) {
    SimConfig c = h100_config();
    c.record_events = true;
    const SimResult r = simulate(mode, c);
    const SimEvent* start = nullptr;
    for (const SimEvent& e : r.events)
      if (e.name == "start" && e.role == "drafter") start = &e;
    ASSERT_NE(start, nullptr) << mode_name(mode);
    EXPECT_EQ(start->rank, c.cluster.tp);  // the drafter rank, after the StartSeqs message
    EXPECT_NEAR(start->start_s, c.cluster.drafter_link.message_s(16 + 4 * (16 + 4 * 100.0)),
                1e-12);
    EXPECT_NEAR(start->dur_s,
                draft_seconds(c.drafter, c.cluster.drafter_device, 4, 100, 0, 0, false), 1e-15);
  }
}

TEST(BranchBatch, ABatchOfBranchesCostsLessThanSingleDrafts) {
  // Pre-speculation drafts the N branches of a sequence as one batch over its shared prefix:
  // under a CPU-like drafter fit (fixed costs per forward and per call) N branches in one call
  // cost far less than N calls of one branch, and more than one.
  DeviceProfile d;
  d.name = "cpu-like";
  d.mem_bw_Bps = 15e9;
  d.peak_flops = {{"bf16", 200e9}};
  SimDrafter m{model_preset("smollm2-135m")};
  d.drafter_fits["smollm2-135m"] =
      DrafterFit{.mem_efficiency = 0.9, .peak_flops = 150e9, .forward_s = 1e-3, .call_s = 0.5e-3};
  const double one = draft_seconds(m, d, 1, 2, 4, 128, true, 1);
  const double batch8 = draft_seconds(m, d, 8, 2, 4, 128, true, 1);
  EXPECT_GT(batch8, one);
  EXPECT_LT(batch8, 0.5 * 8 * one);
}

TEST(BranchBatch, CalibrationSamplesOfBranchBatchesAreFittedWithTheSdRounds) {
  // Samples of SD rounds (a few rows per forward) and of pre-speculation calls (8 branches per
  // sequence) from one known fit: the fit reproduces both within 3%.
  DeviceProfile dev;
  dev.name = "cpu-like";
  dev.mem_bw_Bps = 15e9;
  dev.peak_flops = {{"bf16", 200e9}};
  SimDrafter m{model_preset("smollm2-135m")};
  DeviceProfile truth = dev;
  truth.drafter_fits["smollm2-135m"] =
      DrafterFit{.mem_efficiency = 0.8, .peak_flops = 60e9, .forward_s = 1e-3, .call_s = 0.3e-3};
  std::vector<DraftSample> s;
  for (int32_t k : {2, 4, 7})
    for (double b : {1.0, 4.0}) {
      DraftSample sd{.n = b, .suffix = k + 0.8, .k = k, .context = 140};
      DraftSample br{.n = 8 * b, .suffix = (k + 2) / 2.0, .k = k, .context = 129,
                     .predict_bonus = true, .kv_seqs = b};
      for (DraftSample* x : {&sd, &br}) {
        x->seconds = sample_seconds(m, truth, *x);
        s.push_back(*x);
      }
    }
  const DrafterCalibration c = fit_drafter(m, dev, s);
  EXPECT_LT(c.fit.max_rel_err, 0.03);
}

TEST(LazyStart, TheCatchUpOnThePromptIsNotFoldedIntoThePerCallCost) {
  // A model drafter takes in the prompt in its first call; a calibration run of 8 rounds carries
  // that forward in its timed drafting. Fitted with the start, the per-call cost comes back as
  // the truth's; fitted as if there were none, it is inflated.
  DeviceProfile dev;
  dev.name = "cpu-like";
  dev.mem_bw_Bps = 15e9;
  dev.peak_flops = {{"bf16", 200e9}};
  SimDrafter m{model_preset("smollm2-135m")};
  DeviceProfile truth = dev;
  truth.drafter_fits["smollm2-135m"] =
      DrafterFit{.mem_efficiency = 0.9, .peak_flops = 100e9, .call_s = 0.2e-3};
  std::vector<DraftSample> with, without;
  for (int32_t k : {2, 4, 7})
    for (double b : {1.0, 4.0}) {
      DraftSample x{.n = b, .suffix = k + 0.9, .k = k, .context = 140, .start_seqs = b,
                    .start_prompt = 128, .calls = 24.0 / (k + 1)};
      x.seconds = sample_seconds(m, truth, x);
      with.push_back(x);
      x.start_seqs = 0;
      without.push_back(x);
    }
  const DrafterCalibration good = fit_drafter(m, dev, with);
  const DrafterCalibration bad = fit_drafter(m, dev, without);
  EXPECT_LT(good.fit.max_rel_err, 0.03);
  DeviceProfile fitted = dev;
  fitted.drafter_fits["smollm2-135m"] = good.fit;
  // A round long after the start, as a real run's rounds are: the good fit prices it right.
  const double want = draft_seconds(m, truth, 1, 3, 2, 160, false);
  EXPECT_NEAR(draft_seconds(m, fitted, 1, 3, 2, 160, false) / want, 1, 0.05);
  fitted.drafter_fits["smollm2-135m"] = bad.fit;
  EXPECT_GT(draft_seconds(m, fitted, 1, 3, 2, 160, false) / want, 1.2);
}

}  // namespace
}  // namespace ssd::sim

namespace ssd::sim {
namespace {

TEST(TargetSwitch, VerificationsAfterADraftPayWhatTheCalibrationMeasured) {
  // Verification forwards timed inside SD runs took 0.5 ms more than the profile's warm forward
  // of the same rows: the fit says 0.5 ms, and every simulated SD verification pays it.
  DeviceProfile dev;
  dev.name = "cpu-like";
  dev.mem_bw_Bps = 15e9;
  dev.peak_flops = {{"bf16", 200e9}};
  const ModelShape t = model_preset("smollm2-135m");
  const LinkProfile none{"none", 0, 1};
  std::vector<TargetSample> s;
  for (double rows : {3.0, 5.0, 12.0}) {
    const double warm =
        forward_cost(t, dev, 1, none, {.rows = rows, .seqs = 1, .context = 140}).total_s;
    s.push_back({rows, 1, 140, warm + 0.5e-3});
  }
  EXPECT_NEAR(fit_target_switch(t, dev, s), 0.5e-3, 1e-9);
  // Faster than warm (noise) gives 0, not a negative cost.
  s = {{3, 1, 140, 1e-6}};
  EXPECT_EQ(fit_target_switch(t, dev, s), 0);

  SimConfig c;
  c.cluster.target_device = c.cluster.drafter_device = dev;
  c.cluster.colocated = true;
  c.target = t;
  c.drafter.shape = model_preset("smollm2-domino");
  c.backup.shape.style = DraftStyle::kLookup;
  c.work = {.batch = 1, .tokens = 32, .prompt = 100, .k = 4};
  c.primary.a = 0.6;
  const SimResult warm = simulate(SimMode::kSd, c);
  c.cluster.target_device.drafter_fits["smollm2-domino"] = DrafterFit{.target_switch_s = 0.5e-3};
  const SimResult cold = simulate(SimMode::kSd, c);
  ASSERT_EQ(cold.rounds, warm.rounds);
  EXPECT_NEAR(cold.target_busy_s - warm.target_busy_s, 0.5e-3 * static_cast<double>(cold.rounds),
              1e-9);
}

}  // namespace
}  // namespace ssd::sim
