// The runtime mechanisms the round simulator mirrors beyond the roofline (round_sim.h,
// drafter_calibration.h): the leader's pre-speculation switch, decode steps, the drafter's miss
// policy learnt online, the drafter's start on the prompt, a batch of pre-speculated branches in
// one call, and a calibration run's lazy prompt catch-up.
#include <algorithm>
#include <gtest/gtest.h>

#include <fstream>

#include "runtime/core/error.h"
#include "tests/support/temp_dir.h"
#include "tests/unit/sim/sim_test_configs.h"
#include "topology/sim/branch_plan.h"
#include "topology/sim/drafter_calibration.h"
#include "topology/sim/round_sim.h"
#include "topology/sim/roofline.h"

namespace ssd::sim {
namespace {

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
  // with it (b* defaults to 4 >= batch 4), measures it, and turns to the backup (an n-gram
  // lookup: the leader drafts those misses itself, --miss-at leader, so a backup answer is either
  // a fallback_backup or a leader_drafted).
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
  EXPECT_GT(r.fallback_backup + r.leader_drafted, 0);
  EXPECT_LT(r.b_star, 4);
  // A backup accepted less than the primary: the derivation still takes it when the primary's
  // drafts are this dear; --miss-policy not-worse never does.
  SimConfig w = c;
  w.backup_acc = worse;
  ASSERT_LT(worse.expected_tokens(4), c.primary.expected_tokens(4));
  const SimResult dear = simulate(SimMode::kSsd, w);
  EXPECT_GT(dear.fallback_backup + dear.leader_drafted, 0);
  w.ssd.miss = MissChoice::kNotWorse;
  const SimResult guarded = simulate(SimMode::kSsd, w);
  EXPECT_EQ(guarded.fallback_backup + guarded.leader_drafted, 0);
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
  const DeviceProfile dev = cpu_like_device();
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

// A round of the 135M drafter (k 3 after 2 accepted, at `context` cached tokens) priced with
// `fit`, over the truth's price of it.
double round_over_truth(const SimDrafter& m, const DeviceProfile& dev, const DrafterFit& fit,
                        const DeviceProfile& truth, double context) {
  DeviceProfile fitted = dev;
  fitted.drafter_fits["smollm2-135m"] = fit;
  return draft_seconds(m, fitted, 1, 3, 2, context, false) /
         draft_seconds(m, truth, 1, 3, 2, context, false);
}

TEST(LazyStart, TheCatchUpOnThePromptIsNotFoldedIntoThePerCallCost) {
  // A model drafter takes in the prompt in its first call; a calibration run of 8 rounds carries
  // that forward in its timed drafting. Fitted with the start, the per-call cost comes back as
  // the truth's; fitted as if there were none, it is inflated.
  const DeviceProfile dev = cpu_like_device();
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
  // A round long after the start, as a real run's rounds are: the good fit prices it right.
  EXPECT_NEAR(round_over_truth(m, dev, good.fit, truth, 160), 1, 0.05);
  EXPECT_GT(round_over_truth(m, dev, bad.fit, truth, 160), 1.2);
}

TEST(LazyStart, AMeasuredStartIsTakenAsMeasured) {
  // The start's forward (128 rows) lies past the rows a profile times, and a roofline
  // extrapolated there can price it dearer than it runs; a run's sample then has its rounds
  // fitted too cheap. Here the start truly costs 60% of the truth's roofline price: with the
  // start measured (start_s) the fit prices a round as the truth does; priced, it does not.
  const DeviceProfile dev = cpu_like_device();
  SimDrafter m{model_preset("smollm2-135m")};
  DeviceProfile truth = dev;
  truth.drafter_fits["smollm2-135m"] =
      DrafterFit{.mem_efficiency = 0.8, .peak_flops = 100e9, .forward_s = 0.8e-3, .call_s = 0.2e-3};
  std::vector<DraftSample> measured, priced;
  for (int32_t k : {2, 4, 7})
    for (double b : {1.0, 4.0}) {
      DraftSample x{.n = b, .suffix = k + 0.9, .k = k, .context = 140, .start_seqs = b,
                    .start_prompt = 128, .calls = 48.0 / (k + 1)};
      const double start = 0.6 * (draft_seconds(m, truth, b, 128, 0, 0, false) - 0.2e-3);
      DraftSample rounds = x;
      rounds.start_seqs = 0;
      x.seconds = sample_seconds(m, truth, rounds) + start / x.calls;
      priced.push_back(x);
      x.start_s = start;
      measured.push_back(x);
    }
  const DrafterCalibration good = fit_drafter(m, dev, measured);
  const DrafterCalibration bad = fit_drafter(m, dev, priced);
  EXPECT_LT(good.fit.max_rel_err, 0.03);
  EXPECT_NEAR(round_over_truth(m, dev, good.fit, truth, 60), 1, 0.05);
  EXPECT_LT(round_over_truth(m, dev, bad.fit, truth, 60), 0.9);
}

TEST(HeldBackToken, ADraftsFirstForwardTakesItInWithOneLogitsRowPerRequest) {
  // model_draft_runner.h holds the last committed token back, so a draft's first forward takes
  // in each request's suffix and that token, and asks one logits row per request; the next k - 1
  // forwards one row per request. With nothing to draft (a start on the prompt) the call is the
  // catch-up alone, with no logits.
  const DeviceProfile dev = cpu_like_device();
  SimDrafter m{model_preset("smollm2-135m")};
  DeviceProfile d = dev;
  d.drafter_fits["smollm2-135m"] =
      DrafterFit{.mem_efficiency = 0.8, .peak_flops = 100e9, .forward_s = 0.5e-3, .call_s = 0.2e-3};
  const DeviceProfile on = d.for_drafter("smollm2-135m");
  const LinkProfile none{"none", 0, 1};
  auto fwd = [&](ForwardWork w) { return forward_cost(m.shape, on, 1, none, w).total_s; };
  double want = 0.2e-3 + fwd({.rows = 2 * 4, .seqs = 2, .context = 100, .logits_rows = 2});
  for (int32_t i = 1; i < 4; ++i) want += fwd({.rows = 2, .seqs = 2, .context = 100 + 3.0 + i});
  EXPECT_NEAR(draft_seconds(m, d, 2, 3, 4, 100, false), want, 1e-12);
  EXPECT_NEAR(draft_seconds(m, d, 2, 40, 0, 0, false),
              0.2e-3 + fwd({.rows = 80, .seqs = 2, .context = 0, .logits_rows = 0}), 1e-12);
  // The head-less catch-up is cheaper than a forward of as many rows asking every logits row.
  EXPECT_LT(draft_seconds(m, d, 2, 40, 0, 0, false),
            0.2e-3 + fwd({.rows = 80, .seqs = 2, .context = 0}) - 1e-4);
}

}  // namespace
}  // namespace ssd::sim

namespace ssd::sim {
namespace {

TEST(TargetSwitch, VerificationsAfterADraftPayWhatTheCalibrationMeasured) {
  // Verification forwards timed inside SD runs took 0.5 ms more than the profile's warm forward
  // of the same rows, plus 0.7 ms per sequence beyond the first: the fit finds both, and every
  // simulated SD verification pays them.
  const DeviceProfile dev = cpu_like_device();
  const ModelShape t = model_preset("smollm2-135m");
  const LinkProfile none{"none", 0, 1};
  std::vector<TargetSample> s;
  for (double seqs : {1.0, 4.0})
    for (double rows : {3.0, 5.0, 8.0}) {
      const double warm = forward_cost(t, dev, 1, none,
                                       {.rows = rows * seqs, .seqs = seqs, .context = 140})
                              .total_s;
      s.push_back({rows * seqs, seqs, 140, warm + 0.5e-3 + (seqs - 1) * 0.7e-3});
    }
  const VerifyExtra extra = fit_verify_extra(t, dev, s);
  EXPECT_NEAR(extra.switch_s, 0.5e-3, 1e-9);
  EXPECT_NEAR(extra.seq_s, 0.7e-3, 1e-9);
  // Faster than warm (noise) gives 0, not a negative cost.
  s = {{3, 1, 140, 1e-6}};
  EXPECT_EQ(fit_verify_extra(t, dev, s).switch_s, 0);
  EXPECT_EQ(fit_verify_extra(t, dev, s).seq_s, 0);

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

TEST(TargetSwitch, ALookupDrafterPaysNoSwitch) {
  // The same fitted switch: after a Domino draft every verification pays it; after an n-gram
  // lookup (microseconds, no weights touched) none does.
  SimConfig c = h100_config();
  c.cluster.colocated = true;
  c.work = {.batch = 1, .tokens = 32, .prompt = 100, .k = 4};
  ModelShape ngram;
  ngram.name = "ngram";
  ngram.style = DraftStyle::kLookup;
  for (const ModelShape& shape : {model_preset("smollm2-domino"), ngram}) {
    c.drafter.shape = shape;
    const std::string& name = shape.name;
    // Drafting takes time (a lookup's 5 us per sequence too), so every round drafted.
    DrafterFit fit{.call_s = 20e-6, .lookup_s = 5e-6};
    c.cluster.target_device.drafter_fits[name] = fit;
    const SimResult base = simulate(SimMode::kSd, c);
    fit.target_switch_s = 0.5e-3;
    c.cluster.target_device.drafter_fits[name] = fit;
    const SimResult with = simulate(SimMode::kSd, c);
    c.cluster.target_device.drafter_fits.clear();
    ASSERT_EQ(with.rounds, base.rounds) << name;
    const double want = c.drafter.shape.style == DraftStyle::kLookup
                            ? 0
                            : 0.5e-3 * static_cast<double>(with.rounds);
    EXPECT_NEAR(with.target_busy_s - base.target_busy_s, want, 1e-9) << name;
  }
}

TEST(TargetSwitch, AVerificationOfSeveralSequencesPaysPerSequenceBeyondTheFirst) {
  // Batch 4: every SD verification pays 3 x target_seq_s more; AR steps pay nothing of it.
  SimConfig c = h100_config();
  c.cluster.colocated = true;
  c.work = {.batch = 4, .tokens = 32, .prompt = 100, .k = 4};
  const SimResult base_sd = simulate(SimMode::kSd, c), base_ar = simulate(SimMode::kAr, c);
  c.cluster.target_device.drafter_fits[c.drafter.shape.name] =
      DrafterFit{.target_seq_s = 0.2e-3};
  const SimResult sd = simulate(SimMode::kSd, c), ar = simulate(SimMode::kAr, c);
  ASSERT_EQ(sd.rounds, base_sd.rounds);
  double extra = 0;  // 3 x 0.2 ms per verification of 4 sequences, less as they finish
  for (int64_t r = 0; r < sd.rounds; ++r) extra += 0.6e-3;
  EXPECT_GT(sd.target_busy_s - base_sd.target_busy_s, 0.5 * extra);
  EXPECT_LE(sd.target_busy_s - base_sd.target_busy_s, extra + 1e-9);
  EXPECT_DOUBLE_EQ(ar.target_busy_s, base_ar.target_busy_s);
}

}  // namespace
}  // namespace ssd::sim

namespace ssd::sim {
namespace {

TEST(Push, AHitPushedBeforeTheVerificationEndsCostsNoRoundTrip) {
  // Every round hits but the job's first (nothing is pre-speculated before an outcome says what
  // fits), and the 1B drafter's branches end well before the 70B verification: with the push the
  // target waits for no answer after round 1; without it every round waits for the outcome to
  // reach the drafter and the answer to come back (two link latencies at least).
  SimConfig c = h100_config();
  c.cluster.drafter_link = {"slow", 200e-6, 10e9};  // 200 us each way: visible per round
  const std::vector<OutcomeRecord> t = lookup_trace(20, 2, 4, 4, true);
  const SimResult pushed = simulate(SimMode::kSsd, c, &t);
  c.ssd.push = false;
  const SimResult answered = simulate(SimMode::kSsd, c, &t);
  ASSERT_EQ(pushed.rounds, answered.rounds);
  ASSERT_EQ(pushed.hits, answered.hits);
  EXPECT_GT(answered.target_wait_s - pushed.target_wait_s, 18 * 2 * 200e-6);
  EXPECT_LT(pushed.seconds, answered.seconds - 18 * 2 * 200e-6);
}

TEST(Push, EachChunkIsPushedAsItIsDrafted) {
  // Chunks of 2 branches: the likeliest branch (all 4 accepted, the drafter's first choice) is in
  // the first chunk, drafted well before the verification ends, while the rest of the plan keeps
  // the drafter busy past the outcome (drafter busier than the target), so the install comes
  // after the verification. The runtime pushes each chunk as it is drafted: the hit is the
  // leader's at once. (Pushed once, at the install, it would arrive too late every round.)
  SimConfig c = h100_config();
  c.cluster.drafter_link = {"slow", 200e-6, 10e9};
  c.ssd.chunk = 2;
  c.ssd.fit_window = false;  // draft every chunk until the outcome, as before draft-what-fits
  const std::vector<OutcomeRecord> t = lookup_trace(20, 2, 4, 4, true);
  const SimResult pushed = simulate(SimMode::kSsd, c, &t);
  c.ssd.push = false;
  const SimResult answered = simulate(SimMode::kSsd, c, &t);
  ASSERT_EQ(pushed.hits, answered.hits);
  EXPECT_GT(pushed.drafter_busy_s, pushed.target_busy_s);  // the install is late
  EXPECT_GT(answered.target_wait_s - pushed.target_wait_s, 19 * 2 * 200e-6);
}

TEST(Push, AMissStillWaitsForTheAnswer) {
  // Every lookup misses: the push carries nothing the leader can use, so it changes nothing.
  SimConfig c = h100_config();
  const std::vector<OutcomeRecord> t = lookup_trace(12, 2, 4, 1, false);
  const SimResult on = simulate(SimMode::kSsd, c, &t);
  c.ssd.push = false;
  const SimResult off = simulate(SimMode::kSsd, c, &t);
  EXPECT_NEAR(on.seconds, off.seconds, 1e-12);
}

TEST(FitWindow, ADrafterSlowerThanTheWindowDraftsNothing) {
  // The 1B drafter on a CPU-class device: one branch costs far more than the 70B verification.
  // The runtime's budget (prespec_budget.h) knows a branch's cost from the first speculations,
  // drafts nothing before the first outcome (no window yet) and nothing after (none fits);
  // without it every round's first chunk delays the miss's fallback. (The drafter answers the
  // misses here, --miss-at drafter: drafted by the leader, a miss waits for no chunk.)
  SimConfig c = h100_config();
  c.cluster.drafter_device = device_preset("cpu");
  c.ssd.chunk = 2;
  c.ssd.miss_at_leader = false;
  const std::vector<OutcomeRecord> t = lookup_trace(16, 2, 4, 1, false);
  const SimResult fit = simulate(SimMode::kSsd, c, &t);
  c.ssd.fit_window = false;
  const SimResult all = simulate(SimMode::kSsd, c, &t);
  ASSERT_EQ(fit.rounds, all.rounds);
  EXPECT_EQ(fit.branches_drafted, 0);
  EXPECT_GE(all.branches_drafted, 15 * 2);
  EXPECT_LT(fit.seconds, 0.8 * all.seconds);
}

TEST(FitWindow, EachCallIsSizedToWhatFitsAndNoneWhenNothingDoes) {
  // run_prespeculation asks the rank's fit before every call: 3 of the 4 wanted, then 1, then 0.
  std::vector<PlannedBranch> plan(8);
  std::vector<RankJob> jobs(1);
  jobs[0].cut_s = 1e300;
  std::vector<int64_t> asked;
  int calls = 0;
  jobs[0].fit = [&](double, int64_t want) -> int64_t {
    asked.push_back(want);
    return ++calls == 1 ? 3 : calls == 2 ? 1 : 0;
  };
  const DraftProgress p = run_prespeculation(plan, jobs, 4, [](const std::vector<int64_t>& part) {
    return 1e-3 * static_cast<double>(part.size());
  });
  EXPECT_EQ(asked, (std::vector<int64_t>{4, 4, 4}));
  EXPECT_EQ(p.done[0], 4);
  ASSERT_EQ(p.chunks.size(), 2u);
  EXPECT_EQ(p.chunks[0].branches, 3);
  EXPECT_EQ(p.chunks[1].branches, 1);
  EXPECT_NEAR(p.end_s[0], 4e-3, 1e-12);
}

TEST(DecodeSteps, ALookupDrafterRanksADecodeStepSoBranchesFollowIt) {
  // Every round a decode step (k = 0): a model drafter plans nothing after it, a lookup drafter
  // ranks the step's token and plans branches after it (ssd_drafter_core.cpp, ranked_decode_step).
  SimConfig c = h100_config();
  std::vector<OutcomeRecord> t;
  for (int32_t r = 0; r < 6; ++r)
    t.push_back({.round = r, .seq = 0, .k = 0, .accepted = 0, .prespec = true});
  EXPECT_EQ(simulate(SimMode::kSsd, c, &t).branches_planned, 0);
  c.drafter.shape = ModelShape{};
  c.drafter.shape.name = "ngram";
  c.drafter.shape.style = DraftStyle::kLookup;
  EXPECT_GT(simulate(SimMode::kSsd, c, &t).branches_planned, 0);
}

}  // namespace
}  // namespace ssd::sim
