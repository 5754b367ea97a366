// The start-up warm-up (runtime/model/forward_warmup.h), checked on the CPU:
//   - the size sets a run's config gives (decode 1..B, verification B x (1 + width x k) per k,
//     the drafter's B x width), capped by the replay limit; verification sizes that keep the
//     drafter's feature layers apart from the plain ones; describe_sizes' ranges;
//   - warm_up_forwards through a backend that records replayable regions (RegionRecorder): the
//     grow forward first, then each size twice, largest first, with every buffer allocated
//     before the first size's second run (so nothing a capture baked in moves later); the
//     cache is left as it was; a decode step and a verification round of the run afterwards
//     open regions with keys the warm-up ran, and allocate nothing;
//   - a site whose verification keeps hidden layers warms those sizes with them (and its grow
//     forward too), and a real verification round reading features replays such a key;
//   - sizes that do not fit the cache are skipped.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "runtime/core/error.h"
#include "runtime/generate/generation.h"
#include "runtime/model/forward_warmup.h"
#include "runtime/model/model_file.h"
#include "runtime/model/transformer.h"
#include "runtime/spec/verify_round.h"
#include "tests/support/region_recorder.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tiny_model.h"

namespace ssd {
namespace {

using Sizes = std::vector<int64_t>;

TEST(WarmupSizes, FromTheRunConfig) {
  WarmupPlan p;
  p.max_batch = 3;
  EXPECT_EQ(target_warmup_sizes(p), (Sizes{1, 2, 3}));  // AR: decode steps only
  EXPECT_EQ(drafter_warmup_sizes(p), Sizes{});
  p.ks = {4};
  EXPECT_EQ(target_warmup_sizes(p), (Sizes{1, 2, 3, 5, 10, 15}));
  EXPECT_EQ(drafter_warmup_sizes(p), (Sizes{1, 2, 3}));
  p.ks = {2, 3};
  p.width = 2;
  EXPECT_EQ(target_warmup_sizes(p), (Sizes{1, 2, 3, 5, 7, 10, 14, 15, 21}));
  EXPECT_EQ(drafter_warmup_sizes(p), (Sizes{2, 4, 6}));
  p.max_rows = 10;
  EXPECT_EQ(target_warmup_sizes(p), (Sizes{1, 2, 3, 5, 7, 10}));
  EXPECT_EQ(target_feature_sizes(p), Sizes{});  // no drafter reads features
  p.feature_layers = {0, 1};
  EXPECT_EQ(target_feature_sizes(p), (Sizes{5, 7, 10}));  // verification keeps them
  EXPECT_EQ(target_warmup_sizes(p), (Sizes{1, 2, 3, 5, 7, 10}));  // and some drafter does not
  p.plain_verify = false;  // every drafter reads features: decode steps only without them
  EXPECT_EQ(target_warmup_sizes(p), (Sizes{1, 2, 3}));
  p.ks = {1};  // a one-token draft has no depth steps
  EXPECT_EQ(drafter_warmup_sizes(p), Sizes{});
  p.max_batch = 0;
  EXPECT_THROW(target_warmup_sizes(p), Error);
}

TEST(WarmupSizes, Described) {
  EXPECT_EQ(describe_sizes({}), "");
  EXPECT_EQ(describe_sizes({7}), "7");
  EXPECT_EQ(describe_sizes({1, 2}), "1,2");
  EXPECT_EQ(describe_sizes({1, 2, 3, 4, 20, 40, 41, 42}), "1-4,20,40-42");
}

struct Model {
  test::TempDir tmp;
  ModelFile file;
  test::RegionRecorder rec;
  std::unique_ptr<Transformer> model;
  std::unique_ptr<KvCache> kv;
  explicit Model(int64_t kv_tokens)
      : file(ModelFile::open(test::write_tiny_gguf(test::tiny_spec(Arch::Llama, DType::F32),
                                                   tmp.file("m.gguf")))) {
    model = std::make_unique<Transformer>(file, rec);
    kv = std::make_unique<KvCache>(model->kv_config(kv_tokens));
  }
};

TEST(WarmupForwards, GrowThenEachSizeTwiceLargestFirst) {
  Model m(512);
  WarmupPlan plan;
  plan.max_batch = 2;
  plan.ks = {3};
  const WarmupSite site{"target", m.model.get(), m.kv.get(), 40, target_warmup_sizes(plan)};
  ASSERT_EQ(site.sizes, (Sizes{1, 2, 4, 8}));
  const size_t regions_before = m.rec.keys.size();
  const WarmupResult r = warm_up_forwards({&site, 1});
  EXPECT_EQ(r.forwards, 1 + 2 * 4);
  EXPECT_EQ(r.summary, "target 1,2,4,8");
  EXPECT_EQ(m.rec.violations, 0);
  // The grow forward (40 rows, the last row's logits), then 8, 8, 4, 4, 2, 2, 1, 1 (all rows).
  const std::vector<ReplayKey> keys(m.rec.keys.begin() + regions_before, m.rec.keys.end());
  ASSERT_EQ(keys.size(), 9u);
  EXPECT_EQ(keys[0].n, 40);
  EXPECT_EQ(keys[0].rows, std::vector<int32_t>{39});
  const Sizes order = {8, 8, 4, 4, 2, 2, 1, 1};
  for (size_t i = 0; i < order.size(); ++i) {
    const ReplayKey& k = keys[1 + i];
    EXPECT_EQ(k.n, order[i]);
    EXPECT_EQ(k.owner, m.model.get());
    EXPECT_EQ(k.cache, m.kv.get());
    std::vector<int32_t> all(static_cast<size_t>(k.n));
    for (size_t j = 0; j < all.size(); ++j) all[j] = static_cast<int32_t>(j);
    EXPECT_EQ(k.rows, all);
  }
  // Every allocation before the largest size's second run (its capture on a GPU).
  for (size_t at : m.rec.allocated_at) EXPECT_LE(at, regions_before + 1);
  EXPECT_EQ(m.kv->pages_in_use(), 0);  // the scratch sequences are gone

  // The run itself: an AR batch of 2 and a verification round of 2 sequences at k = 3 open
  // regions the warm-up ran, and allocate nothing.
  LocalTarget target(*m.model, *m.kv);
  const size_t allocs = m.rec.allocated_at.size();
  const size_t run_from = m.rec.keys.size();
  std::vector<GenerationRequest> reqs(2);
  reqs[0].prompt = {5, 77, 258, 1};
  reqs[1].prompt = {9, 12};
  for (auto& q : reqs) q.max_new_tokens = 3;
  generate_ar_batch(target, reqs);
  TargetSeqs seqs(target);
  const DraftTree chain = DraftTree::chain({4, 5, 6});
  std::vector<VerifyInput> in(2);
  for (size_t i = 0; i < 2; ++i) {
    in[i].kv_seq = seqs.create();
    target.forward(Batch::sequence(in[i].kv_seq, {3, 4, 5}, 0));
    in[i].root = 7;
    in[i].root_pos = 3;
    in[i].tree = &chain;
  }
  verify_round(target, in);
  EXPECT_EQ(m.rec.allocated_at.size(), allocs);
  for (size_t i = run_from; i < m.rec.keys.size(); ++i) {
    const ReplayKey& k = m.rec.keys[i];
    if (k.n > 1 && k.rows.size() == 1) continue;  // a prefill: not a repeated shape
    EXPECT_NE(std::find(keys.begin() + 1, keys.end(), k), keys.end()) << "n " << k.n;
  }
}

// A TargetModel that counts the calls it passes on (what a TP leader would broadcast).
class CountingTarget final : public TargetModel {
 public:
  explicit CountingTarget(TargetModel& inner) : inner_(inner) {}
  int creates = 0, releases = 0, forwards = 0, truncates = 0;
  const ModelConfig& config() const override { return inner_.config(); }
  ForwardResult forward(const Batch& b) override {
    ++forwards;
    return inner_.forward(b);
  }
  SeqId create_seq() override {
    ++creates;
    return inner_.create_seq();
  }
  void release_seq(SeqId s) override {
    ++releases;
    inner_.release_seq(s);
  }
  int64_t seq_length(SeqId s) const override { return inner_.seq_length(s); }
  void truncate(SeqId s, int64_t n) override {
    ++truncates;
    inner_.truncate(s, n);
  }
  void compact(SeqId s, int64_t start, std::span<const int32_t> keep) override {
    inner_.compact(s, start, keep);
  }
  KvCapacity capacity() const override { return inner_.capacity(); }
  TokenPicker& picker() override { return inner_.picker(); }

 private:
  TargetModel& inner_;
};

// A site with `via` (a tensor-parallel leader's target): every sequence and forward goes through
// it, none straight to the model, and the forwards are the same as without it.
TEST(WarmupForwards, ASiteViaATargetRunsEveryCallThroughIt) {
  Model direct(512), routed(512);
  WarmupPlan plan;
  plan.max_batch = 2;
  plan.ks = {3};
  const WarmupSite a{"target", direct.model.get(), direct.kv.get(), 40, target_warmup_sizes(plan)};
  warm_up_forwards({&a, 1});
  LocalTarget local(*routed.model, *routed.kv);
  CountingTarget via(local);
  WarmupSite b{"target", routed.model.get(), routed.kv.get(), 40, target_warmup_sizes(plan)};
  b.via = &via;
  const WarmupResult r = warm_up_forwards({&b, 1});
  EXPECT_EQ(via.forwards, r.forwards);
  EXPECT_EQ(via.truncates, r.forwards);
  EXPECT_EQ(via.creates, 2);  // the grow forward's scratch sequence, then the sizes'
  EXPECT_EQ(via.releases, 2);
  ASSERT_EQ(routed.rec.keys.size(), direct.rec.keys.size());
  for (size_t i = 0; i < direct.rec.keys.size(); ++i) {
    EXPECT_EQ(routed.rec.keys[i].n, direct.rec.keys[i].n);
    EXPECT_EQ(routed.rec.keys[i].rows, direct.rec.keys[i].rows);
  }
  EXPECT_EQ(routed.kv->pages_in_use(), 0);
}

// A site whose verification keeps hidden layers: the grow forward keeps them too (so their buffer
// is at its final size before any capture), each hidden size runs twice with them, keyed by them,
// and a real verification round that reads features then opens only regions the warm-up ran.
TEST(WarmupForwards, VerificationKeepingHiddenLayersIsWarmedWithThem) {
  Model m(512);
  WarmupPlan plan;
  plan.ks = {3};
  plan.feature_layers = {1, 0};
  plan.plain_verify = false;
  WarmupSite site{"target", m.model.get(), m.kv.get(), 40, target_warmup_sizes(plan)};
  site.hidden_sizes = target_feature_sizes(plan);
  site.hidden_layers = plan.feature_layers;
  ASSERT_EQ(site.sizes, Sizes{1});
  ASSERT_EQ(site.hidden_sizes, Sizes{4});
  const size_t before = m.rec.keys.size();
  const WarmupResult r = warm_up_forwards({&site, 1});
  EXPECT_EQ(r.summary, "target 1,4 (hidden 1,0)");
  EXPECT_EQ(r.forwards, 1 + 2 * 2);
  const std::vector<ReplayKey> keys(m.rec.keys.begin() + before, m.rec.keys.end());
  ASSERT_EQ(keys.size(), 5u);
  EXPECT_EQ(keys[0].hidden, (std::vector<int32_t>{1, 0}));  // the grow forward
  EXPECT_EQ(keys[1].n, 4);
  EXPECT_EQ(keys[1].hidden, (std::vector<int32_t>{1, 0}));
  EXPECT_EQ(keys[3].n, 1);
  EXPECT_TRUE(keys[3].hidden.empty());
  for (size_t at : m.rec.allocated_at) EXPECT_LE(at, before + 2);
  EXPECT_EQ(m.rec.violations, 0);

  LocalTarget target(*m.model, *m.kv);
  const size_t allocs = m.rec.allocated_at.size();
  TargetSeqs seqs(target);
  const DraftTree chain = DraftTree::chain({4, 5, 6});
  VerifyInput in;
  in.kv_seq = seqs.create();
  target.forward(Batch::sequence(in.kv_seq, {3, 4, 5}, 0));
  in.root = 7;
  in.root_pos = 3;
  in.tree = &chain;
  const size_t run_from = m.rec.keys.size();
  verify_round(target, {&in, 1}, plan.feature_layers);
  EXPECT_EQ(m.rec.allocated_at.size(), allocs);
  ASSERT_EQ(m.rec.keys.size(), run_from + 1);
  EXPECT_EQ(m.rec.keys.back(), keys[1]);
}

TEST(WarmupForwards, SizesBeyondTheCacheAreSkipped) {
  Model m(64);
  const WarmupSite site{"target", m.model.get(), m.kv.get(), 1000, {1, 50, 65, 300}};
  const WarmupResult r = warm_up_forwards({&site, 1});
  EXPECT_EQ(r.summary, "target 1,50");
  EXPECT_EQ(r.forwards, 1 + 2 * 2);  // the grow forward clipped to the cache's 64 positions
  EXPECT_EQ(m.kv->pages_in_use(), 0);
}

}  // namespace
}  // namespace ssd
