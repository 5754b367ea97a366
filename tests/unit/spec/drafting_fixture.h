// Shared set-up for the model-drafter and oracle-drafter tests: a tiny target engine written to
// disk, AR / SD runs on it, vocabulary fingerprints read from GGUF metadata, and a Drafter wrapper
// that records each round's offered depth and accepted length (the per-position Bernoulli trials
// of the acceptance statistics).
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "runtime/backend/backend.h"
#include "runtime/drafters/vocab_fingerprint.h"
#include "runtime/generate/generation.h"
#include "runtime/model/transformer.h"
#include "runtime/spec/sd_generation.h"
#include "tests/support/tiny_model.h"

namespace ssd::test::drafting {

// The vocabulary of a GGUF model file (tokenizer.ggml.tokens), as the factory would fingerprint it.
inline VocabFingerprint gguf_vocab(const ModelFile& f) {
  const auto toks = f.gguf()->get_string_array("tokenizer.ggml.tokens");
  if (!toks) throw std::runtime_error("no tokenizer.ggml.tokens in " + f.path());
  return VocabFingerprint::of(f.path(), *toks);
}

struct Engine {
  ModelFile file;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Transformer> model;
  std::unique_ptr<KvCache> kv;
  explicit Engine(const std::string& path, int threads = 1, int64_t kv_tokens = 1024)
      : file(ModelFile::open(path)), backend(make_cpu_backend(threads)) {
    model = std::make_unique<Transformer>(file, *backend);
    kv = std::make_unique<KvCache>(model->kv_config(kv_tokens));
  }
  int32_t vocab() const { return static_cast<int32_t>(file.config().vocab); }

  GenerationResult ar(const std::vector<int32_t>& prompt, int64_t n, const SamplerConfig& s = {}) {
    GenerationRequest r;
    r.prompt = prompt;
    r.max_new_tokens = n;
    r.sampler = s;
    LocalTarget target(*model, *kv);
    return generate_ar(target, r);
  }
  SdResult sd(Drafter& d, const std::vector<int32_t>& prompt, int64_t n, int32_t k, int32_t width,
              const SamplerConfig& s = {}, uint64_t stream = 0) {
    GenerationRequest r;
    r.prompt = prompt;
    r.max_new_tokens = n;
    r.sampler = s;
    r.stream = stream;
    SdOptions o;
    o.k = k;
    o.width = width;
    LocalTarget target(*model, *kv);
    return generate_sd(target, d, r, o);
  }
};

// Forwards everything to `inner`; observe() also counts, per draft position j, the rounds whose
// verification examined position j (trials) and accepted it (successes).
class RecordingDrafter final : public Drafter {
 public:
  explicit RecordingDrafter(Drafter& inner) : inner_(inner) {}
  std::string name() const override { return inner_.name(); }
  void start(int32_t seq, std::span<const int32_t> p) override { inner_.start(seq, p); }
  void commit(int32_t seq, std::span<const int32_t> t) override { inner_.commit(seq, t); }
  std::vector<DraftTree> draft(std::span<const DraftRequest> r) override { return inner_.draft(r); }
  void finish(int32_t seq) override { inner_.finish(seq); }
  void observe(const DraftOutcome& o) override {
    int32_t depth = 0;
    for (size_t i = 0; i < o.tree->size(); ++i)
      depth = std::max(depth, o.tree->depth(static_cast<int32_t>(i)));
    const int32_t acc = static_cast<int32_t>(o.path.size());
    if (static_cast<int32_t>(trials.size()) < depth) {
      trials.resize(depth, 0);
      successes.resize(depth, 0);
    }
    for (int32_t j = 0; j < depth && j <= acc; ++j) {
      trials[j]++;
      if (j < acc) successes[j]++;
    }
    inner_.observe(o);
  }
  std::vector<int64_t> trials, successes;  // [position]

 private:
  Drafter& inner_;
};

// A tiny Llama, smaller than the engine tests' default (F32 has no block-size constraint), so the
// many forwards of SD runs stay fast: dim 128, GQA 2:1, two layers, the 261-token vocabulary.
inline TinyModelSpec small_spec() {
  TinyModelSpec s = tiny_spec(Arch::Llama, DType::F32);
  s.dim = 128;
  s.ffn_dim = 256;
  s.n_heads = 2;
  s.n_kv_heads = 1;
  s.head_dim = 64;
  return s;
}

inline const std::vector<std::vector<int32_t>> kPrompts = {
    {5, 77, 258, 1, 140, 33, 200, 9, 101},
    {260, 12, 12, 99, 4, 180, 65},
};

}  // namespace ssd::test::drafting
