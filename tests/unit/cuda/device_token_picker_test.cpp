// The device TokenPicker (runtime/backend/cuda/device_token_picker.h) against the host one, op by op:
//   - sample on logits rows in device memory (as a forward with logits_in_backend leaves them)
//     and on host rows (a prefill's), greedy and sampled, awkward vocabularies (1, 7, 1001,
//     49152): the same token;
//   - verify on chains and branching trees, greedy and sampled (the device tree verifier for
//     both), rows after other sequences' rows: the same path, tokens and
//     all_accepted; a row of NaN the walk reaches gives the host's error;
//   - the decoding loops on a tiny model on the CUDA backend: AR and SD (greedy and sampled)
//     with the device picker emit the host picker's tokens (same forwards, so the same logits).
// Exact comparisons throughout: the device code shares its arithmetic with the host
// (kernels/common/*_math.h, twin-tested in tests/unit/device_math). Needs a GPU: every case
// skips with a visible message without one (none has run yet).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>

#include "runtime/backend/cuda/cuda_backend.h"
#include "runtime/backend/cuda/device_token_picker.h"
#include "runtime/core/error.h"
#include "runtime/drafters/model_drafter.h"
#include "runtime/generate/generation.h"
#include "runtime/model/transformer.h"
#include "runtime/spec/sd_generation.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tiny_model.h"
#include "tests/unit/cuda/skip_without_gpu.h"
#include "tests/unit/io/error_text.h"
#include "tests/unit/spec/drafting_fixture.h"

namespace ssd {
namespace {

std::vector<float> random_rows(int64_t rows, int32_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.0f, 2.0f);
  std::vector<float> l(static_cast<size_t>(rows * vocab));
  for (float& x : l) x = std::round(g(rng) * 8.0f) / 8.0f;  // ties on purpose
  return l;
}

// The same rows as a host ForwardResult and as one whose rows live in `be`'s memory.
struct Rows {
  ForwardResult host, device;
  BackendBuffer buf;
  Rows(Backend& be, const std::vector<float>& l, int32_t vocab) {
    host.vocab = device.vocab = vocab;
    host.rows = device.rows = static_cast<int64_t>(l.size()) / vocab;
    host.logits = l;
    buf = be.allocate(l.size() * sizeof(float));
    be.upload(buf.data(), l.data(), l.size() * sizeof(float));
    device.backend_logits = buf.data();
    device.backend = &be;
  }
};

ProcessedDist q_with(int32_t token, int32_t vocab, uint32_t seed) {
  std::vector<float> l = random_rows(1, vocab, seed);
  l[static_cast<size_t>(token)] += 3.0f;
  return process(l.data(), vocab, SamplerConfig{1.0f, 20, 1.0f, 0.0f, 1});
}

const std::vector<SamplerConfig> kConfigs = {
    SamplerConfig{0.0f, 0, 1.0f, 0.0f, 1}, SamplerConfig{0.8f, 0, 1.0f, 0.0f, 2},
    SamplerConfig{1.0f, 20, 0.9f, 0.0f, 3}, SamplerConfig{0.6f, 0, 1.0f, 0.05f, 4}};

void expect_same(const VerifyResult& got, const VerifyResult& want, const std::string& where) {
  EXPECT_EQ(got.path, want.path) << where;
  EXPECT_EQ(got.emitted, want.emitted) << where;
  EXPECT_EQ(got.all_accepted, want.all_accepted) << where;
}

TEST(DeviceTokenPicker, SampleEqualsTheHostPicker) {
  SSD_SKIP_WITHOUT_GPU("device token picking vs the host picker");
  auto be = make_cuda_backend(0);
  auto device = make_device_token_picker(*be);
  EXPECT_TRUE(device->reads_backend_logits());
  HostTokenPicker host;
  for (const int32_t vocab : {1, 7, 1001, 49152}) {
    Rows r(*be, random_rows(3, vocab, static_cast<uint32_t>(vocab)), vocab);
    for (const SamplerConfig& cfg : kConfigs)
      for (size_t row = 0; row < 3; ++row)
        for (uint32_t step = 0; step < 3; ++step) {
          const int32_t want = host.sample(r.host, row, cfg, 11, step);
          const std::string where = "vocab " + std::to_string(vocab) + " row " +
                                    std::to_string(row) + " t " + std::to_string(cfg.temperature);
          EXPECT_EQ(device->sample(r.device, row, cfg, 11, step), want) << where;
          EXPECT_EQ(device->sample(r.host, row, cfg, 11, step), want) << where << " (host rows)";
        }
  }
}

// A decode step's rows at once (greedy ones by one argmax launch), mixed configs, device and
// host rows; a NaN row under greedy gives the host's error.
TEST(DeviceTokenPicker, SampleRowsEqualsTheHostPicker) {
  SSD_SKIP_WITHOUT_GPU("a decode step's rows picked on the device vs the host picker");
  auto be = make_cuda_backend(0);
  auto device = make_device_token_picker(*be);
  HostTokenPicker host;
  for (const int32_t vocab : {7, 49152}) {
    Rows r(*be, random_rows(6, vocab, static_cast<uint32_t>(vocab) + 5), vocab);
    for (size_t mix = 0; mix < 2; ++mix) {  // all greedy; then every config in turn
      std::vector<TokenPicker::RowDraw> draws;
      for (size_t row = 0; row < 6; ++row)
        draws.push_back({mix == 0 ? &kConfigs[0] : &kConfigs[row % kConfigs.size()], 40 + row,
                         static_cast<uint32_t>(row)});
      const std::vector<int32_t> want = host.sample_rows(r.host, draws);
      EXPECT_EQ(device->sample_rows(r.device, draws), want) << "vocab " << vocab << " mix " << mix;
      EXPECT_EQ(device->sample_rows(r.host, draws), want) << "vocab " << vocab << " (host rows)";
    }
  }
  std::vector<float> l = random_rows(2, 17, 3);
  for (int32_t i = 17; i < 34; ++i) l[static_cast<size_t>(i)] = NAN;  // row 1
  Rows nan_rows(*be, l, 17);
  const std::vector<TokenPicker::RowDraw> greedy = {{&kConfigs[0], 1, 0}, {&kConfigs[0], 2, 0}};
  const std::string want = test::error_text([&] { host.sample_rows(nan_rows.host, greedy); });
  EXPECT_NE(want, "<no error>");
  EXPECT_EQ(test::error_text([&] { device->sample_rows(nan_rows.device, greedy); }), want);
}

TEST(DeviceTokenPicker, VerifyEqualsTheHostPicker) {
  SSD_SKIP_WITHOUT_GPU("device verification vs the host picker");
  auto be = make_cuda_backend(0);
  auto device = make_device_token_picker(*be);
  HostTokenPicker host;
  for (const int32_t vocab : {53, 1001}) {
    DraftTree chain;
    for (int32_t i = 0; i < 4; ++i) chain.add(i - 1, 3 + 5 * i, q_with(3 + 5 * i, vocab, 10 + i));
    DraftTree tree;
    tree.add(-1, 4, q_with(4, vocab, 20));
    tree.add(-1, 9, q_with(9, vocab, 21));
    tree.add(0, 11, q_with(11, vocab, 22));
    const DraftTree empty;
    for (const DraftTree* t : std::vector<const DraftTree*>{&chain, &tree, &empty}) {
      for (uint32_t seed = 0; seed < 8; ++seed) {
        std::vector<float> l = random_rows(2 + static_cast<int64_t>(t->size()) + 1, vocab, seed);
        if (!t->empty() && seed % 2)  // some rounds accept
          for (size_t d = 0; d < t->size(); ++d)
            l[static_cast<size_t>((2 + d) * vocab + t->tokens[d])] += 6.0f;
        Rows r(*be, l, vocab);
        for (const SamplerConfig& cfg : kConfigs) {
          const VerifyRng rng{cfg.seed + seed, 5, 40};
          const VerifyResult want = host.verify(*t, r.host, 2, cfg, rng);
          const std::string where = "vocab " + std::to_string(vocab) + " nodes " +
                                    std::to_string(t->size()) + " seed " + std::to_string(seed) +
                                    " t " + std::to_string(cfg.temperature);
          expect_same(device->verify(*t, r.device, 2, cfg, rng), want, where);
          expect_same(device->verify(*t, r.host, 2, cfg, rng), want, where + " (host rows)");
        }
      }
    }
  }
}

TEST(DeviceTokenPicker, NanRowGivesTheHostError) {
  SSD_SKIP_WITHOUT_GPU("device verification of an invalid row");
  auto be = make_cuda_backend(0);
  auto device = make_device_token_picker(*be);
  const int32_t vocab = 17;
  const DraftTree chain = DraftTree::chain({3, 4}, {q_with(3, vocab, 1), q_with(4, vocab, 2)});
  std::vector<float> l = random_rows(3, vocab, 9);
  for (int32_t i = 0; i < vocab; ++i) l[static_cast<size_t>(i)] = NAN;  // the root's row
  Rows r(*be, l, vocab);
  for (const SamplerConfig& cfg : {kConfigs[0], kConfigs[1]}) {
    const std::string want =
        test::error_text([&] { HostTokenPicker().verify(chain, r.host, 0, cfg, VerifyRng{1, 2, 3}); });
    EXPECT_NE(want, "<no error>");
    EXPECT_EQ(test::error_text([&] { device->verify(chain, r.device, 0, cfg, VerifyRng{1, 2, 3}); }), want);
  }
}

TEST(DeviceTokenPicker, LoopsEmitTheHostPickersTokens) {
  SSD_SKIP_WITHOUT_GPU("AR and SD with the device picker on the CUDA backend");
  test::TempDir tmp;
  test::TinyModelSpec spec = test::drafting::small_spec();
  const std::string target_path = test::write_tiny_gguf(spec, tmp.file("t.gguf"));
  spec.n_layers = 1;
  const std::string draft_path = test::write_tiny_gguf(spec, tmp.file("d.gguf"));
  auto be = make_cuda_backend(0);
  ModelFile file = ModelFile::open(target_path);
  Transformer model(file, *be);
  KvCache kv(model.kv_config(2048));
  auto device = make_device_token_picker(*be);
  LocalTarget host_target(model, kv);
  LocalTarget device_target(model, kv, device.get());
  auto drafter = [&] {
    ModelFile f = ModelFile::open(draft_path);
    ModelDrafterOptions o;
    o.target_vocab = test::drafting::gguf_vocab(file);
    o.draft_vocab = test::drafting::gguf_vocab(f);
    o.target_logits = file.config().vocab;
    return std::make_unique<ModelDrafter>(std::move(f), *be, o);
  };
  const std::vector<std::vector<int32_t>> prompts = {{5, 77, 258, 1, 140, 33, 200, 9, 101},
                                                     {260, 12, 12, 99, 4, 180, 65}};
  for (const SamplerConfig& cfg : {kConfigs[0], kConfigs[2]}) {
    std::vector<GenerationRequest> reqs;
    for (size_t i = 0; i < prompts.size(); ++i) {
      GenerationRequest r;
      r.prompt = prompts[i];
      r.max_new_tokens = 14;
      r.sampler = cfg;
      r.stream = 3 + i;
      reqs.push_back(r);
    }
    const auto ar_want = generate_ar_batch(host_target, reqs);
    const auto ar_got = generate_ar_batch(device_target, reqs);
    auto d1 = drafter();
    auto d2 = drafter();
    const SdBatchResult sd_want = generate_sd_batch(host_target, *d1, reqs, SdOptions{3, 1});
    const SdBatchResult sd_got = generate_sd_batch(device_target, *d2, reqs, SdOptions{3, 1});
    for (size_t i = 0; i < reqs.size(); ++i) {
      EXPECT_EQ(ar_got[i].tokens, ar_want[i].tokens) << "AR " << i;
      EXPECT_EQ(sd_got.requests[i].gen.tokens, sd_want.requests[i].gen.tokens) << "SD " << i;
    }
  }
}

}  // namespace
}  // namespace ssd
