// The Transformer's side of the replayable-region contract (Backend::begin_replayable), checked
// on the CPU through a backend that wraps the CPU one and records what happens inside regions:
// a forward without TP is one region keyed by (model, cache, n, logits rows, hidden layers);
// inside it nothing is allocated, uploaded or downloaded (hidden layers are copied aside on the
// backend and downloaded after it); the logits and hidden states are the CPU backend's bit for
// bit. (The CUDA backend replays
// regions as CUDA graphs: tests/unit/cuda/forward_graphs_test.cpp, GPU only.)
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "runtime/backend/backend.h"
#include "runtime/model/model_file.h"
#include "runtime/model/transformer.h"
#include "tests/support/region_recorder.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tiny_model.h"

namespace ssd {
namespace {

using test::RegionRecorder;

TEST(ReplayableRegion, OneRegionPerForwardWithNoTransfersInsideAndTheCpuLogits) {
  test::TempDir tmp;
  const std::string path =
      test::write_tiny_gguf(test::tiny_spec(Arch::Llama, DType::Q8_0), tmp.file("m.gguf"));
  const ModelFile file = ModelFile::open(path);
  RegionRecorder rec;
  auto cpu = make_cpu_backend(1);
  Transformer mr(file, rec), mc(file, *cpu);
  KvCache kr(mr.kv_config(128)), kc(mc.kv_config(128));
  const SeqId sr = kr.create(), sc = kc.create();
  auto both = [&](Batch br) {
    Batch bc = br;
    for (SeqId& s : bc.seqs) s = sc;
    const ForwardResult a = mr.forward(br, kr), b = mc.forward(bc, kc);
    EXPECT_EQ(a.logits, b.logits);
    EXPECT_EQ(a.hidden, b.hidden);
  };
  both(Batch::sequence(sr, {1, 17, 200, 3}, 0));
  both(Batch::sequence(sr, {9}, 4));
  both(Batch::sequence(sr, {5, 6, 7}, 5, true));
  ASSERT_EQ(rec.keys.size(), 3u);
  EXPECT_EQ(rec.ended, 3);
  EXPECT_EQ(rec.violations, 0);
  EXPECT_EQ(rec.keys[0], (ReplayKey{&mr, &kr, 4, {3}}));
  EXPECT_EQ(rec.keys[1], (ReplayKey{&mr, &kr, 1, {0}}));
  EXPECT_EQ(rec.keys[2], (ReplayKey{&mr, &kr, 3, {0, 1, 2}}));

  Batch with_hidden = Batch::sequence(sr, {11, 12}, 8, true);
  with_hidden.hidden_layers = {1, 0};
  both(with_hidden);
  ASSERT_EQ(rec.keys.size(), 4u);
  EXPECT_EQ(rec.keys[3], (ReplayKey{&mr, &kr, 2, {0, 1}, {1, 0}}));
  EXPECT_EQ(rec.violations, 0);
  // The hidden states are the layers' outputs, not a copy of the last one: layer 1 != layer 0.
  Batch again = Batch::sequence(sr, {13}, 10);
  again.hidden_layers = {0, 1};
  const ForwardResult a = mr.forward(again, kr);
  ASSERT_EQ(a.hidden.size(), 2u);
  EXPECT_NE(a.hidden[0], a.hidden[1]);
  EXPECT_EQ(rec.violations, 0);
}

}  // namespace
}  // namespace ssd
