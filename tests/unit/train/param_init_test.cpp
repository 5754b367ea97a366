// Initialisation from the target (param_init.h): the default copied layers continue where the
// features leave off, fc starts as the identity on the deepest feature layer, the output norm is
// the target's, and a random fc really is random.
#include <gtest/gtest.h>

#include "kernels/cpu/rowops.h"
#include "tests/unit/train/train_fixture.h"

namespace ssd::train::test {
namespace {

TEST(ParamInit, DefaultLayersFollowTheDeepestFeatureLayer) {
  DominoConfig c = tiny_train_config();
  c.n_layers = 2;
  c.target_layers = {1, 15, 27};
  EXPECT_EQ(default_init_layers(c, 30), (std::vector<int32_t>{28, 29}));
  c.target_layers = {1, 15, 28};  // no room for two layers after 28: the target's last two
  EXPECT_EQ(default_init_layers(c, 30), (std::vector<int32_t>{28, 29}));
  c.target_layers = {3};
  c.n_layers = 3;
  EXPECT_EQ(default_init_layers(c, 30), (std::vector<int32_t>{4, 5, 6}));
  c.target_layers = {0};
  c.n_layers = 4;  // deeper than the target: clamped at layer 0
  EXPECT_EQ(default_init_layers(c, 2), (std::vector<int32_t>{0, 0, 0, 1}));
}

TEST(ParamInit, DeepestFcIsIdentityOnThatSliceAndNormIsTheTargets) {
  TinyWorld w;
  DominoConfig c = w.cfg;
  c.target_layers = {1, 0};  // the deepest is listed first: slice 0
  const ParamLayout layout(c);
  std::vector<float> p(layout.total(), -7.0f);
  init_params(layout, c, 3, w.file.get(), {1, 0}, FcInit::Deepest, p.data());
  const DominoConstView v = make_view(layout, c, static_cast<const float*>(p.data()));
  const int64_t d = c.target_dim, F = c.feature_dim();
  for (int64_t i = 0; i < d; ++i)
    for (int64_t j = 0; j < F; ++j)
      ASSERT_EQ(v.fc[i * F + j], j == i ? 1.0f : 0.0f) << "fc[" << i << ", " << j << "]";
  const TensorRef& norm = *w.file->weights().output_norm;
  std::vector<float> want(d);
  kernels::dequantize_row(norm.type, norm.data, want.data(), d);
  for (int64_t i = 0; i < d; ++i) EXPECT_EQ(v.norm[i], want[i]) << i;
  bool differs_from_one = false;
  for (int64_t i = 0; i < d; ++i) differs_from_one |= want[i] != 1.0f;
  EXPECT_TRUE(differs_from_one) << "the tiny target's output norm is all ones: the test is blind";
}

TEST(ParamInit, RandomFcIsDenseWithUnitScaleRows) {
  TinyWorld w;
  const DominoConstView v = make_view(*w.layout, w.cfg, static_cast<const float*>(w.params.data()));
  const int64_t d = w.cfg.target_dim, F = w.cfg.feature_dim();
  double sq = 0;
  int64_t zeros = 0;
  for (int64_t i = 0; i < d * F; ++i) {
    sq += static_cast<double>(v.fc[i]) * v.fc[i];
    zeros += v.fc[i] == 0.0f;
  }
  // N(0, 1/F) entries: each row's squared norm is about 1 (mean over d rows within 5%).
  EXPECT_NEAR(sq / static_cast<double>(d), 1.0, 0.05);
  EXPECT_LT(zeros, d * F / 1000);
}

}  // namespace
}  // namespace ssd::train::test
