// The device chain verifier's function (kernels/common/verify_math.h, run by one CUDA thread per
// chain) against ssd::verify_with_dists on the CPU. Tolerance: none: the device must emit the
// CPU verifier's tokens, so every comparison is exact. Chains are packed into one CSR batch and
// addressed exactly as verify_sampled.cu's kernel addresses them.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "kernels/common/verify_math.h"
#include "runtime/sampling/philox.h"
#include "runtime/sampling/sampler.h"
#include "runtime/spec/draft_tree.h"
#include "runtime/spec/residual.h"
#include "runtime/spec/verify.h"

namespace ssd {
namespace {

static_assert(kernels::hd::kVerifyLaneToken == kLaneToken);
static_assert(kernels::hd::kVerifyLaneAccept == accept_lane(0));
static_assert(kernels::hd::kVerifyLaneResidual == kLaneResidual);
static_assert(kernels::hd::kVerifyZeroMass == Residual::kZeroMass);

std::vector<float> random_logits(int32_t n, std::mt19937& rng, float sigma) {
  std::normal_distribution<float> g(0.0f, sigma);
  std::vector<float> l(n);
  for (auto& x : l) x = g(rng);
  return l;
}

// One chain: its target rows p[0..k], draft rows q[0..k), tokens, and the verifier's rng.
struct Chain {
  std::vector<ProcessedDist> p, q;
  std::vector<int32_t> draft;
  VerifyRng rng;
};

// A batch of chains of one k in the CSR layout of cuda::SampledChains.
struct Packed {
  std::vector<int32_t> p_ids, q_ids, draft;
  std::vector<double> p_probs, q_probs;
  std::vector<int64_t> p_off = {0}, q_off = {0};
  int64_t longest_p = 0;
};

Packed pack(const std::vector<Chain>& chains) {
  Packed pk;
  auto add = [](const ProcessedDist& d, std::vector<int32_t>& ids, std::vector<double>& probs,
                std::vector<int64_t>& off) {
    for (const TokenProb& t : d.tokens) {
      ids.push_back(t.id);
      probs.push_back(t.prob);
    }
    off.push_back(static_cast<int64_t>(ids.size()));
  };
  for (const Chain& c : chains) {
    for (const ProcessedDist& d : c.p) {
      add(d, pk.p_ids, pk.p_probs, pk.p_off);
      pk.longest_p = std::max(pk.longest_p, static_cast<int64_t>(d.size()));
    }
    for (const ProcessedDist& d : c.q) add(d, pk.q_ids, pk.q_probs, pk.q_off);
    pk.draft.insert(pk.draft.end(), c.draft.begin(), c.draft.end());
  }
  return pk;
}

// Every chain of the batch through verify_chain_sampled (as the kernel runs it) and through
// verify_with_dists; returns the number of chains that ended in a rejection.
int expect_twins(const std::vector<Chain>& chains, int32_t k, uint64_t seed) {
  const Packed pk = pack(chains);
  std::vector<double> mass(static_cast<size_t>(pk.longest_p));
  int rejected = 0;
  for (size_t b = 0; b < chains.size(); ++b) {
    kernels::hd::ChainLists l;
    l.p_ids = pk.p_ids.data();
    l.p_probs = pk.p_probs.data();
    l.p_off = pk.p_off.data() + b * (k + 1);
    l.q_ids = pk.q_ids.data();
    l.q_probs = pk.q_probs.data();
    l.q_off = pk.q_off.data() + b * k;
    l.draft = pk.draft.data() + b * k;
    l.k = k;
    std::vector<int32_t> out(k + 1, -7);
    bool all = false;
    const Chain& c = chains[b];
    const int32_t n = kernels::hd::verify_chain_sampled(l, seed, c.rng.stream, c.rng.position,
                                                        mass.data(), out.data(), &all);
    const DraftTree tree = k > 0 ? DraftTree::chain(c.draft, c.q) : DraftTree{};
    const VerifyResult want = verify_with_dists(tree, c.p, VerifyRng{seed, c.rng.stream,
                                                                     c.rng.position});
    out.resize(n);
    EXPECT_EQ(out, want.emitted) << "chain " << b << " k " << k;
    EXPECT_EQ(all, want.all_accepted) << "chain " << b << " k " << k;
    rejected += !want.all_accepted && k > 0;
  }
  return rejected;
}

enum class Draft { Independent, SameAsTarget, OneHot };

std::vector<Chain> make_chains(int count, int32_t k, int32_t vocab, const SamplerConfig& cfg,
                               Draft kind, std::mt19937& rng) {
  std::vector<Chain> chains(count);
  for (int b = 0; b < count; ++b) {
    Chain& c = chains[b];
    c.rng = VerifyRng{0, static_cast<uint64_t>(1000 + b), static_cast<uint32_t>(3 * b)};
    for (int32_t i = 0; i <= k; ++i) {
      const auto lp = random_logits(vocab, rng, 1.5f);
      c.p.push_back(process(lp.data(), vocab, cfg));
    }
    for (int32_t i = 0; i < k; ++i) {
      ProcessedDist q;
      if (kind == Draft::SameAsTarget) {
        q = c.p[i];
      } else {
        const auto lq = random_logits(vocab, rng, 1.5f);
        q = process(lq.data(), vocab, cfg);
        if (kind == Draft::OneHot) q.tokens = {TokenProb{q.tokens.front().id, 1.0}};
      }
      c.draft.push_back(sample(q, philox_uniform(99, c.rng.stream, i, kLaneDrafter)));
      c.q.push_back(std::move(q));
    }
  }
  return chains;
}

TEST(VerifyChainTwin, IndependentDraftsEmitTheCpuVerifiersTokens) {
  std::mt19937 rng(11);
  int rejected = 0;
  for (const SamplerConfig cfg : {SamplerConfig{.temperature = 1.0f},
                                  SamplerConfig{.temperature = 0.7f, .top_k = 6},
                                  SamplerConfig{.temperature = 1.3f, .top_p = 0.8f},
                                  SamplerConfig{.temperature = 1.0f, .min_p = 0.05f}}) {
    for (int32_t k = 0; k <= 5; ++k)
      for (uint64_t seed : {1u, 77u})
        rejected += expect_twins(make_chains(40, k, 50, cfg, Draft::Independent, rng), k, seed);
  }
  EXPECT_GT(rejected, 300);  // the residual path was exercised, not only acceptances
}

TEST(VerifyChainTwin, DraftsEqualToTheTargetAreAllAccepted) {
  std::mt19937 rng(12);
  const SamplerConfig cfg{.temperature = 1.0f, .top_k = 10};
  const auto chains = make_chains(50, 4, 200, cfg, Draft::SameAsTarget, rng);
  EXPECT_EQ(expect_twins(chains, 4, 5), 0);
}

TEST(VerifyChainTwin, OneHotDraftsAndAWholeVocabulary) {
  std::mt19937 rng(13);
  expect_twins(make_chains(30, 3, 50, SamplerConfig{.temperature = 1.0f}, Draft::OneHot, rng),
               3, 9);
  expect_twins(make_chains(4, 2, 4096, SamplerConfig{.temperature = 0.9f}, Draft::Independent,
                           rng),
               2, 10);
}

}  // namespace
}  // namespace ssd
