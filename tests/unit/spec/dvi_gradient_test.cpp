// The DVI head's hand-written gradients (runtime/drafters/dvi_loss.h, lora_head.h) against central
// finite differences, in double precision on a tiny head (vocab 11, dim 6, rank 3, scale 0.7),
// for every loss term alone (KL over a full and a top-k target support, reward-masked CE,
// REINFORCE with a baseline) and for the KL->RL mix; plus the float instantiation the trainer
// runs, the target top-k distribution, the schedule and the baseline.
//
// Tolerances:
//   finite differences: step 1e-6, central, so truncation error ~1e-12 and rounding ~1e-10 on
//     losses of order 1; the check is max |fd - analytic| / max |analytic| < 1e-4 (the brief's
//     bound; the measured error is ~1e-9, printed);
//   float vs double on the same data: 1e-4 relative (float rounding of the logits and of the
//     products, sums are in double);
//   probabilities of the top-k target distribution: 1e-6 (float storage).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "runtime/drafters/dvi_loss.h"
#include "runtime/drafters/dvi_trainer.h"
#include "runtime/drafters/lora_head.h"

namespace ssd {
namespace {

constexpr int64_t kV = 11, kD = 6, kR = 3;
constexpr double kScale = 0.7;

// A tiny head with a non-zero B (a zero B would make dA vanish and hide errors in it), a frozen W
// and three tuples: full-support target, top-4 target, one-hot target.
struct Problem {
  std::vector<double> A, B, W;        // [r, dim], [vocab, r], [vocab, dim]
  std::vector<std::vector<double>> z, base, p;
  std::vector<std::vector<int32_t>> ids;
  std::vector<int32_t> tokens{3, 7, 0};
  std::vector<double> rewards{1, 0, 1};

  Problem() {
    std::mt19937_64 rng(1234);
    std::normal_distribution<double> n01(0.0, 1.0);
    auto fill = [&](std::vector<double>& v, size_t n, double sd) {
      v.resize(n);
      for (double& x : v) x = sd * n01(rng);
    };
    fill(A, kR * kD, 0.5);
    fill(B, kV * kR, 0.5);
    fill(W, kV * kD, 0.8);
    for (int t = 0; t < 3; ++t) {
      std::vector<double> zt, bt(kV, 0.0);
      fill(zt, kD, 1.0);
      for (int64_t v = 0; v < kV; ++v)
        for (int64_t c = 0; c < kD; ++c) bt[v] += W[v * kD + c] * zt[c];
      z.push_back(zt);
      base.push_back(bt);
      // Target distributions: softmax of random logits on a support of 11, 4, 1 tokens.
      const int64_t k = t == 0 ? kV : t == 1 ? 4 : 1;
      std::vector<int32_t> id;
      std::vector<double> pr;
      double sum = 0;
      for (int64_t i = 0; i < k; ++i) {
        id.push_back(static_cast<int32_t>((i * 5 + t) % kV));
        pr.push_back(std::exp(n01(rng)));
        sum += pr.back();
      }
      for (double& x : pr) x /= sum;
      ids.push_back(id);
      p.push_back(pr);
    }
  }
  LoraView<double> view() const { return {A.data(), B.data(), kR, kD, kV, kScale}; }
  std::vector<DviSample<double>> samples() const {
    std::vector<DviSample<double>> s;
    for (size_t t = 0; t < z.size(); ++t)
      s.push_back({z[t].data(), base[t].data(), tokens[t], rewards[t], ids[t].data(), p[t].data(),
                   static_cast<int64_t>(ids[t].size())});
    return s;
  }
  double loss(const DviLossWeights& w) const {
    return dvi_batch_loss<double>(view(), samples(), w, nullptr, nullptr).total;
  }
};

// max |fd - analytic| / max |analytic| over every parameter of A and B.
double fd_rel_error(Problem& pb, const DviLossWeights& w) {
  std::vector<double> dA(pb.A.size()), dB(pb.B.size());
  dvi_batch_loss<double>(pb.view(), pb.samples(), w, dA.data(), dB.data());
  const double eps = 1e-6;
  double max_diff = 0, max_grad = 0;
  auto check = [&](std::vector<double>& param, const std::vector<double>& grad) {
    for (size_t i = 0; i < param.size(); ++i) {
      const double keep = param[i];
      param[i] = keep + eps;
      const double up = pb.loss(w);
      param[i] = keep - eps;
      const double down = pb.loss(w);
      param[i] = keep;
      const double fd = (up - down) / (2 * eps);
      max_diff = std::max(max_diff, std::abs(fd - grad[i]));
      max_grad = std::max(max_grad, std::abs(grad[i]));
    }
  };
  check(pb.A, dA);
  check(pb.B, dB);
  EXPECT_GT(max_grad, 1e-3) << "a vanishing gradient would make the check vacuous";
  return max_diff / max_grad;
}

struct TermCase {
  const char* name;
  DviLossWeights w;
};

class DviGradient : public testing::TestWithParam<TermCase> {};

TEST_P(DviGradient, MatchesFiniteDifferencesInDouble) {
  Problem pb;
  const double err = fd_rel_error(pb, GetParam().w);
  std::cout << "  " << GetParam().name << ": relative error " << err << "\n";
  EXPECT_LT(err, 1e-4);
}

INSTANTIATE_TEST_SUITE_P(
    Terms, DviGradient,
    testing::Values(TermCase{"kl", {.kl = 1}}, TermCase{"ce", {.ce = 1}},
                    TermCase{"pg", {.pg = 1, .baseline = 0.37}},
                    TermCase{"pg_negative_advantage", {.pg = 1, .baseline = 1.4}},
                    TermCase{"rl_mix", {.kl = 0.5, .ce = 1, .pg = 0.5, .baseline = 0.3}}),
    [](const testing::TestParamInfo<TermCase>& p) { return std::string(p.param.name); });

// Each term also checked on its own at the logits (g = dL/dl), which is where the formulas in
// dvi_loss.h live; the head's chain rule is covered by the test above.
TEST(DviGradient, LogitGradientOfEachTermMatchesFiniteDifferences) {
  Problem pb;
  const auto s = pb.samples();
  for (const DviLossWeights& w : {DviLossWeights{.kl = 1}, DviLossWeights{.ce = 1},
                                  DviLossWeights{.pg = 1, .baseline = 0.6}}) {
    for (const DviSample<double>& smp : s) {
      std::vector<double> l(smp.base_logits, smp.base_logits + kV);
      std::vector<double> g(kV);
      dvi_row_loss(l.data(), kV, smp, w, g.data());
      double max_diff = 0, max_g = 0;
      for (int64_t v = 0; v < kV; ++v) {
        const double keep = l[v];
        l[v] = keep + 1e-6;
        const double up = dvi_row_loss<double>(l.data(), kV, smp, w, nullptr).total;
        l[v] = keep - 1e-6;
        const double down = dvi_row_loss<double>(l.data(), kV, smp, w, nullptr).total;
        l[v] = keep;
        max_diff = std::max(max_diff, std::abs((up - down) / 2e-6 - g[v]));
        max_g = std::max(max_g, std::abs(g[v]));
      }
      // A term that vanishes (CE on a rejected token) must vanish in the differences too.
      if (max_g == 0) {
        EXPECT_LT(max_diff, 1e-8);
      } else {
        EXPECT_LT(max_diff / max_g, 1e-4);
      }
      // Softmax gradients sum to zero over the vocabulary when the target sums to one.
      double sum = 0;
      for (double x : g) sum += x;
      EXPECT_NEAR(sum, 0.0, 1e-9);
    }
  }
}

TEST(DviGradient, KlIsZeroAtTheTargetAndCeIsMaskedByReward) {
  // Draft logits = log p on the full support: KL = 0 and its gradient vanishes.
  Problem pb;
  std::vector<double> l(kV);
  for (int64_t i = 0; i < kV; ++i) l[pb.ids[0][i]] = std::log(pb.p[0][i]) + 2.5;  // shift-invariant
  DviSample<double> s{nullptr, nullptr, 4, 0.0, pb.ids[0].data(), pb.p[0].data(), kV};
  std::vector<double> g(kV);
  const DviLossValue v = dvi_row_loss(l.data(), kV, s, {.kl = 1, .ce = 1}, g.data());
  EXPECT_NEAR(v.kl, 0.0, 1e-12);
  EXPECT_EQ(v.ce, 0.0);  // r = 0: the rejected token is not imitated
  for (double x : g) EXPECT_NEAR(x, 0.0, 1e-12);
}

TEST(DviGradient, FloatPathMatchesDouble) {
  Problem pb;
  auto f = [](const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); };
  // Round the inputs to float first so both paths see the same numbers.
  auto round = [](std::vector<double>& v) {
    for (double& x : v) x = static_cast<float>(x);
  };
  round(pb.A);
  round(pb.B);
  for (int t = 0; t < 3; ++t) {
    round(pb.z[t]);
    round(pb.base[t]);
    round(pb.p[t]);
  }
  const std::vector<float> A = f(pb.A), B = f(pb.B);
  std::vector<std::vector<float>> z, base, p;
  std::vector<DviSample<float>> sf;
  for (int t = 0; t < 3; ++t) {
    z.push_back(f(pb.z[t]));
    base.push_back(f(pb.base[t]));
    p.push_back(f(pb.p[t]));
  }
  for (int t = 0; t < 3; ++t)
    sf.push_back({z[t].data(), base[t].data(), pb.tokens[t], pb.rewards[t], pb.ids[t].data(),
                  p[t].data(), static_cast<int64_t>(pb.ids[t].size())});
  const DviLossWeights w{.kl = 0.5, .ce = 1, .pg = 0.5, .baseline = 0.3};
  std::vector<float> dAf(A.size()), dBf(B.size());
  std::vector<double> dAd(A.size()), dBd(B.size());
  const double lf = dvi_batch_loss<float>({A.data(), B.data(), kR, kD, kV, static_cast<float>(kScale)},
                                          sf, w, dAf.data(), dBf.data()).total;
  const double ld = dvi_batch_loss<double>(pb.view(), pb.samples(), w, dAd.data(), dBd.data()).total;
  EXPECT_NEAR(lf, ld, 1e-5 * std::abs(ld));
  double diff = 0, mag = 0;
  for (size_t i = 0; i < dAd.size(); ++i) {
    diff = std::max(diff, std::abs(dAf[i] - dAd[i]));
    mag = std::max(mag, std::abs(dAd[i]));
  }
  for (size_t i = 0; i < dBd.size(); ++i) {
    diff = std::max(diff, std::abs(dBf[i] - dBd[i]));
    mag = std::max(mag, std::abs(dBd[i]));
  }
  EXPECT_LT(diff / mag, 1e-4);
}

TEST(DviTrainer, TargetDistIsTheRenormalisedTopK) {
  LoraHead head(kD, kV, {.rank = 2});
  DviTrainer tr(head, {.batch = 4, .target_top_k = 3});
  const std::vector<float> logits{0.5f, 2.0f, -1.0f, 2.0f, 1.0f, 0.0f, -3.0f, 0.2f, 0.1f, 1.5f, -0.5f};
  std::vector<int32_t> ids;
  std::vector<float> probs;
  tr.target_dist(logits.data(), ids, probs);
  ASSERT_EQ(ids, (std::vector<int32_t>{1, 3, 9}));  // ties by lower id
  const double e15 = std::exp(-0.5);
  EXPECT_NEAR(probs[0], 1.0 / (2 + e15), 1e-6);
  EXPECT_NEAR(probs[1], 1.0 / (2 + e15), 1e-6);
  EXPECT_NEAR(probs[2], e15 / (2 + e15), 1e-6);
  DviTrainer full(head, {.batch = 4, .target_top_k = 0});
  full.target_dist(logits.data(), ids, probs);
  EXPECT_EQ(ids.size(), static_cast<size_t>(kV));
  double sum = 0;
  for (float x : probs) sum += x;
  EXPECT_NEAR(sum, 1.0, 1e-6);
}

DviTuple tuple(int32_t token, float reward, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> n01(0.0f, 1.0f);
  DviTuple t;
  for (int64_t i = 0; i < kD; ++i) t.z.push_back(n01(rng));
  for (int64_t i = 0; i < kV; ++i) t.base_logits.push_back(n01(rng));
  t.token = token;
  t.reward = reward;
  t.p_ids = {token, (token + 1) % static_cast<int32_t>(kV)};
  t.p_probs = {0.75f, 0.25f};
  return t;
}

TEST(DviTrainer, ScheduleBaselineAndBufferBound) {
  LoraHead head(kD, kV, {.rank = 2});
  DviTrainer tr(head, {.capacity = 5, .train_every = 2, .batch = 4, .kl_updates = 2,
                       .ce_weight = 1.0, .pg_weight = 0.25, .baseline_rate = 0.5});
  EXPECT_EQ(tr.current_weights().ce, 0.0);
  EXPECT_EQ(tr.current_weights().pg, 0.0);
  EXPECT_FALSE(tr.add(tuple(1, 1, 1)));
  EXPECT_NEAR(tr.stats().baseline, 1.0, 1e-12);  // exact mean over the first 1/rate = 2 tuples
  EXPECT_TRUE(tr.add(tuple(2, 0, 2)));            // the 2nd tuple triggers a step
  EXPECT_NEAR(tr.stats().baseline, 0.5, 1e-12);
  tr.add(tuple(3, 0, 3));                         // then an exponential average with rate 1/2
  EXPECT_NEAR(tr.stats().baseline, 0.25, 1e-12);
  EXPECT_TRUE(tr.add(tuple(4, 1, 4)));
  EXPECT_EQ(tr.stats().updates, 2);
  EXPECT_EQ(tr.stats().kl_phase_updates, 2);
  EXPECT_TRUE(tr.in_rl_phase());
  EXPECT_EQ(tr.current_weights().ce, 1.0);
  EXPECT_EQ(tr.current_weights().pg, 0.25);
  for (int i = 0; i < 6; ++i) tr.add(tuple(i % 5, 1, 10 + i));
  EXPECT_EQ(tr.buffer_size(), 5u);
  EXPECT_EQ(tr.stats().tuples, 10);
  EXPECT_EQ(tr.stats().kl_phase_updates, 2);
  EXPECT_EQ(tr.stats().updates, 5);
}

TEST(DviTrainer, StepsReduceTheDistillationLoss) {
  // The same 8 tuples trained on repeatedly (KL only, SGD): the loss must fall.
  LoraHead head(kD, kV, {.rank = 3, .init_range = 0.5f});
  DviTrainer tr(head, {.capacity = 8, .train_every = 1000, .batch = 8, .kl_updates = 1000,
                       .optimizer = DviOptimizer::Sgd, .lr = 0.5});
  for (int i = 0; i < 8; ++i) tr.add(tuple(i % 5, 1, 100 + i));
  const double first = tr.step().total;
  double last = first;
  for (int i = 0; i < 50; ++i) last = tr.step().total;
  std::cout << "  KL loss " << first << " -> " << last << " after 51 SGD steps\n";
  EXPECT_LT(last, 0.5 * first);
}

// The cost of one update at the default model's size (vocab 49152, dim 576) with the default
// options (batch 32, rank 8, top-64 targets): printed, since it runs on the drafter's time.
TEST(DviTrainer, StepCostAtRealModelSize) {
  const int64_t V = 49152, D = 576;
  LoraHead head(D, V, {});
  DviOptions o;
  o.train_every = 1 << 30;  // steps only when asked
  DviTrainer tr(head, o);
  std::mt19937_64 rng(5);
  std::normal_distribution<float> n01(0.0f, 1.0f);
  for (int i = 0; i < o.batch; ++i) {
    DviTuple t;
    for (int64_t c = 0; c < D; ++c) t.z.push_back(n01(rng));
    for (int64_t v = 0; v < V; ++v) t.base_logits.push_back(3 * n01(rng));
    t.token = i * 7;
    t.reward = static_cast<float>(i % 2);
    tr.target_dist(t.base_logits.data(), t.p_ids, t.p_probs);
    tr.add(std::move(t));
  }
  const int steps = 3;
  for (int i = 0; i < steps; ++i) EXPECT_TRUE(std::isfinite(tr.step().total));
  const auto& B = head.B();
  EXPECT_TRUE(std::any_of(B.begin(), B.end(), [](float x) { return x != 0; }));
  std::cout << "  one update (batch " << o.batch << ", rank " << head.rank() << ", vocab " << V
            << "): " << 1e3 * tr.stats().train_s / steps << " ms\n";
}

}  // namespace
}  // namespace ssd
