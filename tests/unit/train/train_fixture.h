// Shared set-up of the trainer tests: a tiny target GGUF (tests/support/tiny_model.h: dim 256,
// 4/2 heads x 64, ffn 512, vocab 261, 2 layers), a Domino config that fits it, its frozen pieces
// and random parameters (W2 made non-zero so the head really acts), and random sequences.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "runtime/model/model_file.h"
#include "runtime/train/domino_params.h"
#include "runtime/train/frozen_target.h"
#include "runtime/train/param_init.h"
#include "runtime/train/train_rng.h"
#include "tests/support/domino_writer.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tiny_model.h"

namespace ssd::train::test {

// The drafter of tests/support/domino_writer.h with a narrower head (cheaper finite differences)
// and the block size the caller wants.
inline DominoConfig tiny_train_config(int32_t block = 6) {
  DominoConfig c = ssd::test::tiny_domino_spec().cfg;
  c.block_size = block;
  c.gru_dim = 32;
  c.rank = 16;
  return c;
}

struct TinyWorld {
  ssd::test::TempDir tmp;
  std::string target_path;
  std::unique_ptr<ModelFile> file;
  DominoConfig cfg;
  std::unique_ptr<FrozenTarget> frozen;
  std::unique_ptr<ParamLayout> layout;
  std::vector<float> params;

  explicit TinyWorld(DominoConfig c = tiny_train_config(), float w2_scale = 0.3f) : cfg(c) {
    target_path = ssd::test::write_tiny_gguf(ssd::test::tiny_spec(Arch::Llama, DType::F32),
                                             tmp.file("target.gguf"));
    file = std::make_unique<ModelFile>(ModelFile::open(target_path));
    frozen = std::make_unique<FrozenTarget>(*file, cfg.draft_vocab);
    layout = std::make_unique<ParamLayout>(cfg);
    params.resize(layout->total());
    init_params(*layout, cfg, 5, file.get(), {1, 0}, FcInit::Random, params.data());
    const ParamTensor& w2 = layout->find("head.w2.weight");
    for (int64_t i = 0; i < w2.size; ++i)
      params[w2.offset + i] = static_cast<float>(w2_scale * rng_normal(99, 1, i));
  }
};

// Random tokens [L] and features [L, F] (uniform +-1; the trainer only needs numbers).
inline void random_sequence(int64_t L, int64_t F, int64_t vocab, uint64_t seed,
                            std::vector<int32_t>& tokens, std::vector<float>& features) {
  tokens.resize(L);
  features.resize(L * F);
  for (int64_t i = 0; i < L; ++i) tokens[i] = static_cast<int32_t>(rng_below(seed, 1, i, vocab));
  for (int64_t i = 0; i < L * F; ++i)
    features[i] = static_cast<float>(2.0 * rng_uniform(seed, 2, i) - 1.0);
}

}  // namespace ssd::train::test
