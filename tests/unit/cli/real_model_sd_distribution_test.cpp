// Sampled speculative decoding keeps the target's distribution, checked on the real default model
// (env SSD_MODEL; skipped visibly without it). At a real chat context, the target's processed
// distribution p (temperature 0.8, top-k 40) and a drafter's q are computed once; then N rounds
// of draft-then-verify are simulated (x ~ q, verify against p) and the first emitted token's
// empirical distribution is compared with N plain AR draws from p. The drafter is the target's
// own logits at temperature 1.6 and top-k 40: same support, flatter, so about half of the drafts
// are rejected and the residual matters. (An early-exit head at layer 8 or 24 of this model has
// a top-40 disjoint from the target's at this position, so every draft would be rejected and
// a broken residual could not be told apart.)
//
// Bound: for two independent N-sample empirical distributions of the same p, the expected total
// variation distance is about 0.5 * sum_i sqrt(4 p_i (1 - p_i) / (pi N)); the test allows 1.6x
// that expectation (the TV of N = 40000 draws concentrates tightly: its standard deviation is a
// few percent of its mean here). A verifier that draws the correction from p instead of the
// residual max(0, p - q) must exceed the same bound.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <numbers>

#include "actors/roles/model_session.h"
#include "runtime/spec/verify.h"
#include "runtime/tokenizer/chat_template.h"

namespace ssd {
namespace {

std::string model_path() {
  const char* p = std::getenv("SSD_MODEL");
  return p && std::filesystem::exists(p) ? p : "";
}

double tv(const std::map<int32_t, int64_t>& a, const std::map<int32_t, int64_t>& b, int64_t n) {
  std::map<int32_t, double> diff;
  for (const auto& [t, c] : a) diff[t] += static_cast<double>(c) / n;
  for (const auto& [t, c] : b) diff[t] -= static_cast<double>(c) / n;
  double s = 0;
  for (const auto& [t, d] : diff) s += std::abs(d);
  return 0.5 * s;
}

TEST(RealModelSdSampling, FirstTokenDistributionMatchesAr) {
  const std::string model = model_path();
  if (model.empty()) GTEST_SKIP() << "SSD_MODEL is not set or missing (launch/fetch-model.sh)";
  ModelSession s(SessionOptions{model, 2, 256});
  const ChatTemplate tmpl = ChatTemplate::from_spec(s.tokenizer().spec());
  const ChatMessage m{"user", "Write one sentence about autumn."};
  const auto prompt = s.tokenizer().encode(tmpl.render({&m, 1}, true), true, true);
  const int32_t vocab = static_cast<int32_t>(s.file().config().vocab);
  const SamplerConfig cfg{0.8f, 40, 1.0f, 0.0f, 123};

  auto target_logits = s.model().forward(Batch::sequence(s.kv().create(), prompt, 0), s.kv());
  const ProcessedDist p = process(target_logits.logits_row(0), vocab, cfg);
  SamplerConfig flat = cfg;
  flat.temperature = 1.6f;
  const ProcessedDist q = process(target_logits.logits_row(0), vocab, flat);

  constexpr int64_t kN = 40000;
  double overlap = 0;  // sum_x min(p, q): the expected acceptance rate
  for (const auto& tp : p.tokens) overlap += std::min(tp.prob, q.prob_of(tp.id));
  std::map<int32_t, int64_t> sd, ar, broken;
  int64_t accepted = 0;
  for (int64_t i = 0; i < kN; ++i) {
    // The drafter's draw and the AR draw use streams of their own, so trials are independent.
    const int32_t x = sample(q, philox_uniform(7, 1000 + i, 0, 0));
    DraftTree tree;
    tree.add(-1, x, q);
    const std::vector<ProcessedDist> dists = {p, p};  // the node's row is only read on a bonus
    const VerifyResult v = verify_with_dists(tree, dists, VerifyRng{cfg.seed, static_cast<uint64_t>(i), 0});
    sd[v.emitted.front()]++;
    accepted += v.accepted();
    ar[sample(p, philox_uniform(9, 2000000 + i, 0, 0))]++;
    // Broken: accept as usual, but on rejection draw the correction from p itself.
    const double u = philox_uniform(cfg.seed, i, 0, kLaneAccept);
    const bool acc = u * q.prob_of(x) < p.prob_of(x);
    broken[acc ? x : sample(p, philox_uniform(cfg.seed, i, 0, kLaneResidual))]++;
  }
  double expected = 0;
  for (const auto& tp : p.tokens)
    expected += 0.5 * std::sqrt(4 * tp.prob * (1 - tp.prob) / (std::numbers::pi * kN));
  const double bound = 1.6 * expected;
  const double got = tv(sd, ar, kN), bad = tv(broken, ar, kN);
  std::printf("[ tv ] acceptance %.3f (expected %.3f) | TV(SD, AR) %.4f | TV(broken, AR) %.4f | "
              "bound %.4f\n", static_cast<double>(accepted) / kN, overlap, got, bad, bound);
  EXPECT_LT(got, bound);
  EXPECT_GT(bad, bound) << "the test must be able to see a wrong verifier";
  EXPECT_GT(accepted, kN / 10) << "q should be a plausible drafter";
  EXPECT_LT(accepted, kN * 9 / 10) << "q should differ from p, or the test proves little";
}

}  // namespace
}  // namespace ssd
