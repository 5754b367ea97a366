// Domino checkpoints: a good one opens with its config intact; every kind of bad one (missing or
// extra tensor, wrong shape, no or incomplete config, target layers the target lacks, a dim or
// vocabulary that is not the target's) is refused at construction, before any generation, with a
// message naming the file and the offending field or tensor.
#include <gtest/gtest.h>

#include <functional>

#include "runtime/core/error.h"
#include "runtime/drafters/domino/domino_drafter.h"
#include "runtime/io/safetensors_writer.h"
#include "tests/support/domino_writer.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tiny_model.h"
#include "tests/unit/spec/drafting_fixture.h"

namespace ssd {
namespace {

using test::DominoSpec;
using test::DominoTensors;
using test::TempDir;

// EXPECT_TRUE(has(err, "...")) prints the whole message when the piece is missing.
testing::AssertionResult has(const std::string& err, const std::string& piece) {
  if (err.find(piece) != std::string::npos) return testing::AssertionSuccess();
  return testing::AssertionFailure() << "message \"" << err << "\" lacks \"" << piece << "\"";
}

struct World {
  TempDir tmp;
  std::unique_ptr<test::drafting::Engine> target;
  World() {
    target = std::make_unique<test::drafting::Engine>(
        test::write_tiny_gguf(test::tiny_spec(Arch::Llama, DType::F32), tmp.file("t.gguf")));
  }
  // The error message of constructing a drafter on `path` (empty when it succeeds).
  std::string error_of(const std::string& path) {
    try {
      DominoOptions o;
      o.path = path;
      DominoDrafter d(*target->model, o);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
};

TEST(DominoCheckpoint, GoodCheckpointOpensWithItsConfig) {
  World w;
  const DominoSpec spec = test::tiny_domino_spec();
  const std::string path = test::write_domino(spec, w.tmp.file("d.safetensors"));
  const DominoCheckpoint ck = DominoCheckpoint::open(path);
  EXPECT_EQ(ck.config().to_json(), spec.cfg.to_json());
  EXPECT_EQ(ck.layers.size(), 2u);
  EXPECT_EQ(ck.head.w2->ne, (std::vector<uint64_t>{32, 261}));  // [V, r] stored, ne innermost first
  DominoOptions o;
  o.path = path;
  DominoDrafter d(*w.target->model, o);
  EXPECT_EQ(d.target_feature_layers(), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(d.name(), "domino");
}

TEST(DominoCheckpoint, HalfPrecisionCheckpointsOpen) {
  World w;
  for (DType t : {DType::F16, DType::BF16}) {
    DominoSpec spec = test::tiny_domino_spec();
    spec.type = t;
    EXPECT_EQ(w.error_of(test::write_domino(spec, w.tmp.file("h.safetensors"))), "");
  }
}

TEST(DominoCheckpoint, MissingTensorIsNamed) {
  World w;
  const DominoSpec spec = test::tiny_domino_spec();
  DominoTensors t = test::make_domino_tensors(spec);
  t.erase("head.w1.weight");
  const std::string path =
      test::write_domino(t, spec.cfg.to_json(), spec.type, w.tmp.file("d.safetensors"));
  const std::string err = w.error_of(path);
  EXPECT_TRUE(has(err, "missing tensor 'head.w1.weight'"));
  EXPECT_TRUE(has(err, "[32, 320]"));  // the expected shape [r, d + g]
  EXPECT_TRUE(has(err, path));
}

TEST(DominoCheckpoint, WrongShapeIsNamed) {
  World w;
  const DominoSpec spec = test::tiny_domino_spec();
  DominoTensors t = test::make_domino_tensors(spec);
  auto& k = t.at("layers.1.self_attn.k_proj.weight");  // should be [kv_heads * head_dim, d]
  k.shape = {64, 256};
  k.values.resize(64 * 256);
  const std::string err = w.error_of(
      test::write_domino(t, spec.cfg.to_json(), spec.type, w.tmp.file("d.safetensors")));
  EXPECT_TRUE(has(err, "'layers.1.self_attn.k_proj.weight' has shape [64, 256], expected "
                       "[128, 256]"));
}

TEST(DominoCheckpoint, ExtraTensorIsRefused) {
  World w;
  const DominoSpec spec = test::tiny_domino_spec();
  DominoTensors t = test::make_domino_tensors(spec);
  t["layers.2.input_layernorm.weight"] = t.at("layers.1.input_layernorm.weight");
  const std::string err = w.error_of(
      test::write_domino(t, spec.cfg.to_json(), spec.type, w.tmp.file("d.safetensors")));
  EXPECT_TRUE(has(err, "unexpected tensor 'layers.2.input_layernorm.weight'"));
}

TEST(DominoCheckpoint, TargetLayerOutOfRangeNamesLayerAndDepth) {
  World w;
  DominoSpec spec = test::tiny_domino_spec();
  spec.cfg.target_layers = {0, 5};  // the tiny target has 2 layers
  const std::string err = w.error_of(test::write_domino(spec, w.tmp.file("d.safetensors")));
  EXPECT_TRUE(has(err, "target_layers"));
  EXPECT_TRUE(has(err, "target layer 5"));
  EXPECT_TRUE(has(err, "has 2 layers (0..1)"));
}

TEST(DominoCheckpoint, VocabularyMismatchIsNamed) {
  World w;
  DominoSpec spec = test::tiny_domino_spec();
  spec.cfg.target_vocab = 300;
  const std::string err = w.error_of(test::write_domino(spec, w.tmp.file("d.safetensors")));
  EXPECT_TRUE(has(err, "'target_vocab' = 300 does not match the target's vocabulary size 261"));
}

TEST(DominoCheckpoint, DimMismatchIsNamed) {
  World w;
  DominoSpec spec = test::tiny_domino_spec();
  spec.cfg.target_dim = 128;
  const std::string err = w.error_of(test::write_domino(spec, w.tmp.file("d.safetensors")));
  EXPECT_TRUE(has(err, "'target_dim' = 128 does not match the target's dim 256"));
}

TEST(DominoCheckpoint, MissingOrIncompleteConfigIsNamed) {
  World w;
  const DominoSpec spec = test::tiny_domino_spec();
  const DominoTensors t = test::make_domino_tensors(spec);
  {
    SafetensorsWriter sw;
    for (const auto& [name, x] : t) sw.add_tensor(name, x.shape, x.values);
    EXPECT_TRUE(has(w.error_of(sw.write(w.tmp.file("noconfig.safetensors"))),
                    "no \"domino_config\""));
  }
  // The config with one edit -> the error message of a drafter on it.
  auto with = [&](const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json j = nlohmann::json::parse(spec.cfg.to_json());
    edit(j);
    return w.error_of(test::write_domino(t, j.dump(), spec.type, w.tmp.file("c.safetensors")));
  };
  EXPECT_TRUE(has(with([](auto& j) { j.erase("rank"); }), "missing field 'rank'"));
  EXPECT_TRUE(has(with([](auto& j) { j["kv_heads"] = 3; }),
                  "'heads' = 4 is not a multiple of 'kv_heads' = 3"));
  EXPECT_TRUE(has(with([](auto& j) { j["block_size"] = "8"; }),
                  "'block_size' must be an integer"));
  EXPECT_TRUE(has(with([](auto& j) { j["target_layers"] = nlohmann::json::array(); }),
                  "'target_layers' is empty"));
}

}  // namespace
}  // namespace ssd
