// The same weights stored as a GGUF file and as a Hugging Face checkpoint give the same logits.
// This pins the two loaders to each other where they differ most: tensor names, shape order,
// Q/K row permutation + interleaved RoPE (GGUF Llama) versus rotate-half RoPE (HF), RoPE scaling
// (GGUF rope_freqs tensor versus config.json rope_scaling), tied embeddings and sharding.
// Tolerance: 1e-5 relative (same float32 values, only the rotation pairing differs in layout).
#include <gtest/gtest.h>

#include <cmath>

#include "runtime/backend/backend.h"
#include "runtime/model/transformer.h"
#include "tests/support/reference_forward.h"
#include "tests/support/rel_err.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tiny_model.h"

namespace ssd {
namespace {

std::vector<float> prompt_logits(const std::string& path, const std::vector<int32_t>& prompt) {
  ModelFile f = ModelFile::open(path);
  auto backend = make_cpu_backend(1);
  Transformer t(f, *backend);
  KvCache kv(t.kv_config(256));
  return t.forward(Batch::sequence(kv.create(), prompt, 0, true), kv).logits;
}

using test::rel_err;

struct FormatCase {
  const char* name;
  Arch arch;
  bool llama3_rope;
  bool tied;
  int shards;
};

class GgufVsSafetensors : public testing::TestWithParam<FormatCase> {};

TEST_P(GgufVsSafetensors, SameLogits) {
  const FormatCase& c = GetParam();
  test::TempDir tmp;
  auto spec = test::tiny_spec(c.arch, DType::F32);
  spec.llama3_rope = c.llama3_rope;
  spec.tied = c.tied;
  std::vector<int32_t> prompt;
  for (int i = 0; i < 70; ++i) prompt.push_back((i * 53 + 11) % 258);  // long enough for scaling
  const auto a = prompt_logits(test::write_tiny_gguf(spec, tmp.file("m.gguf")), prompt);
  const auto b = prompt_logits(test::write_tiny_safetensors(spec, tmp.path(), c.shards), prompt);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_LT(rel_err(a, b), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(
    Archs, GgufVsSafetensors,
    testing::Values(FormatCase{"llama", Arch::Llama, false, false, 1},
                    FormatCase{"llama3_rope_tied", Arch::Llama, true, true, 1},
                    FormatCase{"qwen2_sharded", Arch::Qwen2, false, true, 3},
                    FormatCase{"qwen3", Arch::Qwen3, false, false, 2}),
    [](const auto& p) { return std::string(p.param.name); });

TEST(Safetensors, HalfPrecisionCheckpointsMatchReference) {
  for (DType type : {DType::BF16, DType::F16}) {
    test::TempDir tmp;
    auto spec = test::tiny_spec(Arch::Qwen2, type);
    const std::string dir = test::write_tiny_safetensors(spec, tmp.path());
    ModelFile f = ModelFile::open(dir);
    const std::vector<int32_t> prompt = {1, 2, 3, 200, 100};
    const auto ref = test::reference_logits(f, prompt);
    const auto got = prompt_logits(dir, prompt);
    for (size_t t = 0; t < prompt.size(); ++t) {
      std::vector<float> want(ref[t].begin(), ref[t].end());
      std::vector<float> row(got.begin() + t * spec.vocab, got.begin() + (t + 1) * spec.vocab);
      EXPECT_LT(rel_err(row, want), 1e-4) << dtype_name(type) << " position " << t;
    }
  }
}

}  // namespace
}  // namespace ssd
