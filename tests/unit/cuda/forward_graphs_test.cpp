// CUDA graphs in the forward: the same forwards on a backend with graphs (the first forward of a
// shape measured, the second captured, the rest replayed) and on one without give the same
// logits bit for bit, for decode steps, verification blocks on forks and a size left eager; and
// verification blocks that keep hidden layers (a drafter fed target features) give the same
// hidden states too.
// Needs a GPU; skips with a visible message without one (none has run yet).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runtime/backend/backend.h"
#include "runtime/backend/cuda/cuda_backend.h"
#include "runtime/model/model_file.h"
#include "runtime/model/transformer.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tiny_model.h"
#include "tests/unit/cuda/skip_without_gpu.h"

namespace ssd {
namespace {

// One model, one cache, on one backend; every call runs the same batch on it.
struct ModelRun {
  ModelRun(const ModelFile& file, const CudaBackendOptions& o)
      : be(make_cuda_backend(o)), model(file, *be), kv(model.kv_config(256)), seq(kv.create()) {}
  std::unique_ptr<Backend> be;
  Transformer model;
  KvCache kv;
  SeqId seq;
};

void expect_same(const ForwardResult& a, const ForwardResult& b, const std::string& what) {
  ASSERT_EQ(a.logits.size(), b.logits.size()) << what;
  for (size_t i = 0; i < a.logits.size(); ++i)
    ASSERT_EQ(a.logits[i], b.logits[i]) << what << " at " << i;
  ASSERT_EQ(a.hidden, b.hidden) << what;
}

TEST(CudaForwardGraphs, ReplayGivesTheEagerLogitsBitForBit) {
  SSD_SKIP_WITHOUT_GPU("CUDA graph replay vs eager forward");
  test::TempDir tmp;
  const std::string path =
      test::write_tiny_gguf(test::tiny_spec(Arch::Llama, DType::Q4_K), tmp.file("m.gguf"));
  const ModelFile file = ModelFile::open(path);
  ModelRun graphed(file, CudaBackendOptions{.device = 0, .graphs = true, .graph_sizes = {1, 5}});
  ModelRun eager(file, CudaBackendOptions{.device = 0, .graphs = false});
  auto both = [&](const std::vector<int32_t>& tokens, int32_t start, bool all, SeqId gs,
                  SeqId es, const std::string& what) {
    const ForwardResult g = graphed.model.forward(Batch::sequence(gs, tokens, start, all),
                                                  graphed.kv);
    const ForwardResult e = eager.model.forward(Batch::sequence(es, tokens, start, all), eager.kv);
    expect_same(g, e, what);
  };
  // The prompt (6 tokens: not a graph size, eager on both).
  both({1, 17, 200, 3, 99, 45}, 0, false, graphed.seq, eager.seq, "prompt");
  // Decode steps: measured, captured, then replayed; pages fill and new ones are taken.
  int32_t pos = 6;
  for (int32_t step = 0; step < 24; ++step, ++pos)
    both({static_cast<int32_t>((step * 37 + 5) % 200)}, pos, false, graphed.seq, eager.seq,
         "decode step " + std::to_string(step));
  // Verification blocks of K = 4 (5 rows, all logits) on forks (copy on write of the shared
  // last page, deferred in the graphed run), then the fork dropped as after a rejection.
  for (int32_t round = 0; round < 4; ++round) {
    const SeqId gf = graphed.kv.fork(graphed.seq), ef = eager.kv.fork(eager.seq);
    both({3, 1, 4, 1, static_cast<int32_t>(5 + round)}, pos, true, gf, ef,
         "verify round " + std::to_string(round));
    graphed.kv.release(gf);
    eager.kv.release(ef);
  }
  // The same verification blocks keeping hidden layers 1 and 0: their own key, replayed too.
  for (int32_t round = 0; round < 4; ++round) {
    const SeqId gf = graphed.kv.fork(graphed.seq), ef = eager.kv.fork(eager.seq);
    Batch gb = Batch::sequence(gf, {2, 7, 1, 8, static_cast<int32_t>(2 + round)}, pos, true);
    gb.hidden_layers = {1, 0};
    Batch eb = gb;
    for (SeqId& s : eb.seqs) s = ef;
    const ForwardResult g = graphed.model.forward(gb, graphed.kv);
    const ForwardResult e = eager.model.forward(eb, eager.kv);
    ASSERT_EQ(g.hidden.size(), 2u);
    expect_same(g, e, "verify round with hidden layers " + std::to_string(round));
    graphed.kv.release(gf);
    eager.kv.release(ef);
  }
}

}  // namespace
}  // namespace ssd
