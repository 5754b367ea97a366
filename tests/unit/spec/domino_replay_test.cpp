// A Domino backbone pass as a replayable region (Backend::begin_replayable), checked on the CPU
// through the region recorder (tests/support/region_recorder.h): one region per pass, keyed by the
// pass's shape (rows, the output rows, each block's known rows / outputs / inject term), with no
// allocation, upload or download inside it; the same shape twice gives the same key, another
// shape another key; and the pass's hidden states and base logits are the plain CPU backend's bit
// for bit (with context_inject, whose rows are now read where they are instead of uploaded).
// On CUDA those regions replay as graphs: tests/unit/cuda/domino_walk_test.cpp compares graphed
// and eager passes where a GPU exists.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "runtime/drafters/domino/domino_backbone.h"
#include "runtime/model/model_file.h"
#include "runtime/model/transformer.h"
#include "tests/support/domino_writer.h"
#include "tests/support/region_recorder.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tiny_model.h"

namespace ssd {
namespace {

// One target + backbone + context cache on a backend; the same 10 context rows appended.
struct Pass {
  Pass(const ModelFile& file, const DominoCheckpoint& ck, Backend& be,
       const std::vector<float>& features)
      : target(file, be), bb(ck, target), kv(bb.kv_config(512)), seq(kv.create()) {
    bb.append_context(kv, seq, 0, features, ck.config().context_inject ? &inject : nullptr);
  }
  DominoBackbone::Result run(std::vector<DominoBackbone::Block> blocks) {
    for (DominoBackbone::Block& b : blocks) {
      b.seq = seq;
      if (!inject.empty() && b.n_ctx > 0) b.inject = inject.data() + (b.n_ctx - 1) * 256;
    }
    return bb.forward(kv, blocks);
  }
  Transformer target;
  DominoBackbone bb;
  KvCache kv;
  SeqId seq;
  std::vector<float> inject;
};

TEST(DominoReplay, OnePassIsOneRegionKeyedByItsShapeWithTheCpuResults) {
  for (bool context_inject : {false, true}) {
    test::TempDir tmp;
    const ModelFile file = ModelFile::open(
        test::write_tiny_gguf(test::tiny_spec(Arch::Llama, DType::F32), tmp.file("t.gguf")));
    test::DominoSpec spec = test::tiny_domino_spec();
    spec.cfg.context_inject = context_inject;
    const DominoCheckpoint ck = DominoCheckpoint::open(test::write_domino(spec, tmp.file("d.st")));
    std::vector<float> features(10 * 512);
    for (size_t i = 0; i < features.size(); ++i)
      features[i] = static_cast<float>((i * 37 % 101) / 50.0 - 1.0);
    test::RegionRecorder rec;
    auto cpu = make_cpu_backend(1);
    Pass recorded(file, ck, rec, features), plain(file, ck, *cpu, features);

    // Two blocks (the SD shape; an SSD shape with 3 known tokens after 8 context rows), twice,
    // then another shape.
    const std::vector<DominoBackbone::Block> shape_a = {{-1, 10, {40}, 7}, {-1, 8, {3, 9, 40}, 4}};
    const std::vector<DominoBackbone::Block> shape_b = {{-1, 10, {41}, 5}};
    const size_t before = rec.keys.size();
    for (const auto* shape : {&shape_a, &shape_a, &shape_b}) {
      const auto got = recorded.run(*shape), want = plain.run(*shape);
      EXPECT_EQ(got.offset, want.offset);
      EXPECT_EQ(got.hidden, want.hidden) << "inject " << context_inject;
      EXPECT_EQ(got.logits, want.logits) << "inject " << context_inject;
    }
    ASSERT_EQ(rec.keys.size(), before + 3);
    EXPECT_EQ(rec.ended, 3);
    EXPECT_EQ(rec.violations, 0);
    const ReplayKey& a = rec.keys[before];
    EXPECT_EQ(a.owner, &recorded.bb);
    EXPECT_EQ(a.n, 8 + 10);  // 1 + 7 MASK rows, 3 + 7 MASK rows
    EXPECT_EQ(a.rows, (std::vector<int32_t>{1, 2, 3, 4, 5, 6, 7, 11, 12, 13, 14}));
    // Per block: known rows, outputs, inject term, MASK rows (B - 1 = 7: not trimmed).
    EXPECT_EQ(a.layout,
              (std::vector<int32_t>{1, 7, context_inject, 7, 3, 4, context_inject, 7}));
    EXPECT_EQ(rec.keys[before + 1], a);  // the same shape: the same key (a replay on CUDA)
    EXPECT_NE(rec.keys[before + 2], a);
    // Nothing allocated once the first pass had grown the buffers.
    for (size_t at : rec.allocated_at) EXPECT_LE(at, before + 1);
  }
}

}  // namespace
}  // namespace ssd
