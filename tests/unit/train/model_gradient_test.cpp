// Finite-difference check of the whole Domino training model's gradient (DominoTrainModel::run)
// for a few parameters of EVERY tensor of the checkpoint: the two entries with the largest
// analytic gradient and two pseudo-random ones. Tiny config (block 4, 2 layers, 3 anchors, one
// block cut short by the sequence end), lambda 0.5 so both CE terms flow, teacher forcing; once
// with the full vocabulary, once with a draft vocabulary that leaves some labels out, and once
// with context_inject (its weight made non-zero so the path back into the context is live), and
// with SSD-shaped blocks of 3 known tokens.
//
// Tolerance: |fd - an| <= 5% |an| + 1% of the tensor's largest |gradient| + 1e-4. The objective
// is a float32 computation ~15 stages deep whose value is O(10); central differences with
// h = 1e-2 then carry rounding noise of order 1e-5..1e-4 absolute and truncation error of order
// h^2 times the curvature, both far inside the bound for the large entries, while a wrong or
// missing gradient term is off by O(100%) of the entry.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "runtime/train/domino_train_model.h"
#include "tests/unit/train/train_fixture.h"

namespace ssd::train {
namespace {

void check_model_gradient(std::vector<int32_t> draft_vocab, bool inject = false,
                          int32_t known = 1) {
  DominoConfig cfg = test::tiny_train_config(4);
  cfg.draft_vocab = std::move(draft_vocab);
  cfg.context_inject = inject;
  test::TinyWorld w(cfg);
  if (inject) {  // starts at 0, which would hide the path back into the context; make it live
    const ParamTensor& t = w.layout->find("ctx_inject.weight");
    for (int64_t i = 0; i < t.size; ++i)
      w.params[t.offset + i] = static_cast<float>(0.2 * rng_normal(77, 1, i));
  }
  const int64_t L = 12;
  std::vector<int32_t> tokens;
  std::vector<float> feats;
  test::random_sequence(L, cfg.feature_dim(), cfg.target_vocab, 8, tokens, feats);
  const std::vector<int32_t> anchors = {known - 1, 4, 9};
  LossOptions opt;
  opt.known = known;
  opt.lambda = 0.5f;
  opt.gamma = 2.0f;
  DominoTrainModel model(cfg, *w.frozen);
  std::vector<float> grads(w.layout->total(), 0.0f);
  DominoView gv = make_view(*w.layout, cfg, grads.data());
  auto objective = [&]() {
    return model
        .run(make_view(*w.layout, cfg, static_cast<const float*>(w.params.data())), nullptr,
             tokens, feats, anchors, opt)
        .loss;
  };
  const LossStats st = model.run(
      make_view(*w.layout, cfg, static_cast<const float*>(w.params.data())), &gv, tokens, feats,
      anchors, opt);
  ASSERT_EQ(st.blocks, 3);
  if (!cfg.draft_vocab.empty()) {
    ASSERT_GT(st.oov, 0) << "the draft vocabulary test needs oov labels";
  }

  const double h = 1e-2;
  for (const ParamTensor& t : w.layout->tensors()) {
    const float* g = grads.data() + t.offset;
    std::vector<int64_t> idx(t.size);
    std::iota(idx.begin(), idx.end(), 0);
    std::partial_sort(idx.begin(), idx.begin() + 2, idx.end(),
                      [&](int64_t a, int64_t b) { return std::fabs(g[a]) > std::fabs(g[b]); });
    const double gmax = std::fabs(g[idx[0]]);
    ASSERT_GT(gmax, 1e-5) << t.name << " gets no gradient at all";
    std::vector<int64_t> pick = {idx[0], idx[1], (t.size * 7) / 13, (t.size * 11) / 17};
    for (int64_t i : pick) {
      float& p = w.params[t.offset + i];
      const float keep = p;
      p = keep + static_cast<float>(h);
      const double jp = objective();
      p = keep - static_cast<float>(h);
      const double jm = objective();
      p = keep;
      const double fd = (jp - jm) / (2 * h);
      EXPECT_NEAR(g[i], fd, 0.05 * std::fabs(fd) + 0.01 * gmax + 1e-4)
          << t.name << " index " << i << " (largest |grad| " << gmax << ")";
    }
  }
}

TEST(DominoTrainModel, GradientMatchesFiniteDifferences) { check_model_gradient({}); }

TEST(DominoTrainModel, GradientMatchesFiniteDifferencesWithDraftVocab) {
  std::vector<int32_t> vocab;
  for (int32_t t = 0; t < 261; t += 2) vocab.push_back(t);
  check_model_gradient(vocab);
}

TEST(DominoTrainModel, GradientMatchesFiniteDifferencesWithContextInject) {
  check_model_gradient({}, /*inject=*/true);
}

TEST(DominoTrainModel, GradientMatchesFiniteDifferencesWithKnownTokens) {
  check_model_gradient({}, /*inject=*/true, /*known=*/3);
}

}  // namespace
}  // namespace ssd::train
