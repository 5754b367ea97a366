// The device tree verifier's function (kernels/common/verify_math.h's verify_tree_sampled, run
// by one CUDA thread per tree) against ssd::verify_with_dists on the CPU, on chains (one child
// per node) and on trees with siblings (several rejections at one node, each sibling on its own
// accept lane, the residual shrinking in turn). Tolerance: none: the device must emit the CPU
// verifier's tokens and path, so every comparison is exact. Trees are packed into one CSR batch
// and addressed exactly as verify_sampled.cu's kernel addresses them (tests/support/
// sampled_trees.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "kernels/common/verify_math.h"
#include "runtime/sampling/sampler.h"
#include "runtime/spec/residual.h"
#include "runtime/spec/verify.h"
#include "tests/support/sampled_trees.h"

namespace ssd {
namespace {

namespace hd = kernels::hd;
using test::TreeCase;
using test::TreeDraft;

static_assert(hd::kVerifyLaneToken == kLaneToken);
static_assert(hd::kVerifyLaneAccept == accept_lane(0));
static_assert(hd::kVerifyLaneResidual == kLaneResidual);
static_assert(hd::kVerifyZeroMass == Residual::kZeroMass);
static_assert(hd::verify_accept_lane(1) == accept_lane(1));
static_assert(hd::verify_accept_lane(kMaxVerifySiblings - 1) ==
              accept_lane(kMaxVerifySiblings - 1));

// Every case through verify_tree_sampled (as the kernel runs it: with the token -> entry index
// over `vocab` ids; and, when `linear`, also with linear lookups) and verify_with_dists; returns
// how many ended in a rejection (the residual path) and how many rejected a sibling before
// accepting or drawing (several rejections at one node). The index must be all -1 again after
// every tree.
struct Counts {
  int rejected = 0, accepted_after_sibling = 0;
};
Counts expect_twins(const std::vector<TreeCase>& cases, uint64_t seed, int32_t vocab,
                    bool linear = true) {
  const test::PackedTrees pk = test::pack_trees(cases);
  std::vector<double> mass(static_cast<size_t>(pk.longest_p)), saved(mass.size());
  std::vector<int32_t> index(static_cast<size_t>(vocab), -1);
  Counts n;
  for (size_t b = 0; b < cases.size(); ++b) {
    const TreeCase& c = cases[b];
    const VerifyResult want =
        verify_with_dists(c.tree, c.p, VerifyRng{seed, c.rng.stream, c.rng.position});
    for (bool indexed : {true, false}) {
      if (!indexed && !linear) continue;
      std::vector<int32_t> out(pk.n + 1, -7), path(std::max(pk.n, 1), -7);
      bool all = false;
      const hd::TokenIndex ti = indexed ? hd::TokenIndex{index.data(), vocab} : hd::TokenIndex{};
      const int32_t emitted =
          hd::verify_tree_sampled(pk.lists(b), seed, c.rng.stream, c.rng.position, mass.data(),
                                  saved.data(), out.data(), path.data(), &all, ti);
      out.resize(emitted);
      path.resize(emitted - 1);
      EXPECT_EQ(out, want.emitted) << "case " << b << (indexed ? " indexed" : " linear");
      EXPECT_EQ(path, want.path) << "case " << b << (indexed ? " indexed" : " linear");
      EXPECT_EQ(all, want.all_accepted) << "case " << b << (indexed ? " indexed" : " linear");
    }
    EXPECT_EQ(std::count(index.begin(), index.end(), -1), vocab) << "case " << b;
    n.rejected += !want.all_accepted && pk.n > 0;
    for (int32_t node : want.path)  // accepted a child that is not its parent's first
      n.accepted_after_sibling += DraftChildren(c.tree).first(c.tree.parents[node]) != node;
  }
  return n;
}

std::vector<TreeCase> make_cases(int count, const std::vector<int32_t>& parents, int32_t vocab,
                                 const SamplerConfig& cfg, TreeDraft kind, std::mt19937& rng) {
  std::vector<TreeCase> cases;
  for (int b = 0; b < count; ++b)
    cases.push_back(test::random_tree_case(
        parents, vocab, cfg, kind, rng,
        VerifyRng{0, static_cast<uint64_t>(1000 + b), static_cast<uint32_t>(3 * b)}));
  return cases;
}

std::vector<int32_t> chain_of(int32_t k) {
  std::vector<int32_t> parents;
  for (int32_t i = 0; i < k; ++i) parents.push_back(i - 1);
  return parents;
}

const SamplerConfig kConfigs[] = {SamplerConfig{.temperature = 1.0f},
                                  SamplerConfig{.temperature = 0.7f, .top_k = 6},
                                  SamplerConfig{.temperature = 1.3f, .top_p = 0.8f},
                                  SamplerConfig{.temperature = 1.0f, .min_p = 0.05f}};

TEST(VerifyTreeTwin, ChainsEmitTheCpuVerifiersTokens) {
  std::mt19937 rng(11);
  int rejected = 0;
  for (const SamplerConfig& cfg : kConfigs)
    for (int32_t k = 0; k <= 5; ++k)
      for (uint64_t seed : {1u, 77u})
        rejected +=
            expect_twins(make_cases(40, chain_of(k), 50, cfg, TreeDraft::Independent, rng), seed,
                         50)
                .rejected;
  EXPECT_GT(rejected, 300);  // the residual path was exercised, not only acceptances
}

TEST(VerifyTreeTwin, TreesWithSiblingsEmitTheCpuVerifiersTokensAndPath) {
  // Three roots; node 0 has children 3, 4, 5; node 3 has 6, 7; node 1 has 8.
  const std::vector<int32_t> shape = {-1, -1, -1, 0, 0, 0, 3, 3, 1};
  std::mt19937 rng(14);
  Counts total;
  for (const SamplerConfig& cfg : kConfigs)
    for (uint64_t seed : {2u, 31u}) {
      const Counts c =
          expect_twins(make_cases(60, shape, 40, cfg, TreeDraft::Independent, rng), seed, 40);
      total.rejected += c.rejected;
      total.accepted_after_sibling += c.accepted_after_sibling;
    }
  EXPECT_GT(total.rejected, 100);               // every sibling rejected, then the residual
  EXPECT_GT(total.accepted_after_sibling, 50);  // a later sibling accepted after a rejection
}

TEST(VerifyTreeTwin, DraftsEqualToTheTargetAreAllAccepted) {
  std::mt19937 rng(12);
  const SamplerConfig cfg{.temperature = 1.0f, .top_k = 10};
  EXPECT_EQ(expect_twins(make_cases(50, chain_of(4), 200, cfg, TreeDraft::SameAsTarget, rng), 5,
                         200)
                .rejected,
            0);
}

TEST(VerifyTreeTwin, OneHotDraftsAndAWholeVocabulary) {
  std::mt19937 rng(13);
  expect_twins(make_cases(30, {-1, -1, 0, 1}, 50, SamplerConfig{.temperature = 1.0f},
                          TreeDraft::OneHot, rng),
               9, 50);
  expect_twins(make_cases(4, chain_of(2), 4096, SamplerConfig{.temperature = 0.9f},
                          TreeDraft::Independent, rng),
               10, 4096);
}

TEST(VerifyTreeTwin, TemperatureOnlyOverASmolLmSizedVocabularyThroughTheIndex) {
  // SmolLM2's 49152 ids, temperature only: every list is the whole vocabulary, the case the
  // linear lookups made ~10^9 steps per rejection. Indexed only (the linear path would take
  // minutes here); a tree with siblings so rejections repeat at one node.
  std::mt19937 rng(15);
  const Counts c = expect_twins(make_cases(3, {-1, -1, 0, 0, 1}, 49152,
                                           SamplerConfig{.temperature = 0.8f},
                                           TreeDraft::Independent, rng),
                                16, 49152, /*linear=*/false);
  EXPECT_GT(c.rejected, 0);
}

}  // namespace
}  // namespace ssd
