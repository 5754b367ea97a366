// The target seam (LocalTarget, TargetSeqs) and batched AR generation on a tiny random model:
// LocalTarget is the Transformer + KvCache it wraps, call for call; generate_ar_batch gives every
// request exactly what generate_ar gives it alone (greedy and sampled, B = 1, 3, 4, different
// prompt lengths, budgets and a stop token), with ONE forward per step over the requests still
// generating, and every sequence released at the end; a batch that cannot fit the cache is
// refused before any work, with a message naming the sizes.
//
// Tolerances: LocalTarget vs the Transformer on the same batch is exact (the same calls run).
// Batched vs single runs compare token ids exactly: rows of a batch agree with single-row
// forwards to ~2e-5 relative (transformer_test.cpp), far from flipping a greedy argmax or a
// Philox draw of these random models (a flip would need a near-tie within 2e-5, which the
// fixed prompts here do not hit; the assertion would show it as a token mismatch).
#include <gtest/gtest.h>

#include <stdexcept>

#include "runtime/backend/backend.h"
#include "runtime/core/error.h"
#include "runtime/generate/generation.h"
#include "runtime/model/transformer.h"
#include "tests/support/counting_target.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tiny_model.h"

namespace ssd {
namespace {

using test::CountingTarget;
using test::TempDir;

struct Engine {
  TempDir tmp;
  ModelFile file;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Transformer> model;
  std::unique_ptr<KvCache> kv;
  explicit Engine(int64_t kv_tokens = 1024)
      : file(ModelFile::open(test::write_tiny_gguf(spec(), tmp.file("m.gguf")))),
        backend(make_cpu_backend(1)) {
    model = std::make_unique<Transformer>(file, *backend);
    kv = std::make_unique<KvCache>(model->kv_config(kv_tokens));
  }
  // The spec tests' small Llama (F32, dim 128): fast enough for many generations.
  static test::TinyModelSpec spec() {
    test::TinyModelSpec s = test::tiny_spec(Arch::Llama, DType::F32);
    s.dim = 128;
    s.ffn_dim = 256;
    s.n_heads = 2;
    s.n_kv_heads = 1;
    s.head_dim = 64;
    return s;
  }
};

GenerationRequest request(std::vector<int32_t> prompt, int64_t n, const SamplerConfig& s = {},
                          uint64_t stream = 0) {
  GenerationRequest r;
  r.prompt = std::move(prompt);
  r.max_new_tokens = n;
  r.sampler = s;
  r.stream = stream;
  return r;
}

// Prompts of lengths 1, 9, 7 and 23.
const std::vector<std::vector<int32_t>> kPrompts = {
    {42},
    {5, 77, 258, 1, 140, 33, 200, 9, 101},
    {260, 12, 12, 99, 4, 180, 65},
    {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3, 2, 3, 8, 4, 6, 2, 6},
};
const std::vector<int64_t> kBudgets = {12, 20, 1, 7};

TEST(LocalTarget, IsTheTransformerAndItsCache) {
  Engine e;
  KvCache other(e.model->kv_config(1024));
  LocalTarget t(*e.model, *e.kv);
  EXPECT_EQ(&t.config(), &e.model->config());
  EXPECT_EQ(t.capacity().tokens, 1024);
  EXPECT_EQ(t.capacity().page_tokens, e.kv->config().page_tokens);

  const SeqId a = t.create_seq();
  const SeqId b = other.create();
  const Batch batch = Batch::sequence(a, kPrompts[1], 0, true);
  const ForwardResult via = t.forward(batch);
  Batch direct_batch = batch;
  direct_batch.seqs.assign(batch.size(), b);
  const ForwardResult direct = e.model->forward(direct_batch, other);
  EXPECT_EQ(via.logits, direct.logits);
  EXPECT_EQ(t.seq_length(a), 9);

  const std::vector<int32_t> keep = {0, 2, 5};
  t.compact(a, 3, keep);
  EXPECT_EQ(e.kv->length(a), 6);
  for (int64_t i = 0; i < 3; ++i)  // position 3 + keep[i] moved to 3 + i, K and V alike
    EXPECT_EQ(e.kv->key(0, a, 3 + i)[0], other.key(0, b, 3 + keep[i])[0]);
  t.truncate(a, 2);
  EXPECT_EQ(t.seq_length(a), 2);
  t.release_seq(a);
  EXPECT_FALSE(e.kv->alive(a));
}

TEST(TargetSeqs, ReleasesOnEveryExitPath) {
  Engine e;
  LocalTarget t(*e.model, *e.kv);
  SeqId kept = -1;
  try {
    TargetSeqs seqs(t);
    const SeqId a = seqs.create();
    kept = seqs.create();
    t.forward(Batch::sequence(a, kPrompts[1], 0));
    t.forward(Batch::sequence(kept, kPrompts[2], 0));
    seqs.release(a);
    EXPECT_FALSE(e.kv->alive(a));
    EXPECT_THROW(seqs.release(a), Error) << "a sequence released twice is refused";
    throw std::runtime_error("unwind");
  } catch (const std::runtime_error&) {
  }
  EXPECT_FALSE(e.kv->alive(kept));
  EXPECT_EQ(e.kv->pages_in_use(), 0);
}

// Each request of a batch gets what it gets alone; forwards are shared per step.
void expect_batch_equals_single(const SamplerConfig& s) {
  Engine e;
  LocalTarget local(*e.model, *e.kv);
  std::vector<GenerationRequest> reqs;
  std::vector<GenerationResult> single;
  for (size_t i = 0; i < kPrompts.size(); ++i) {
    reqs.push_back(request(kPrompts[i], kBudgets[i], s, /*stream=*/100 + i));
    single.push_back(generate_ar(local, reqs.back()));
  }
  // A stop token: request 1 stops at the 5th token it would generate (and emits it).
  reqs[1].stop_ids = {single[1].tokens[4]};
  single[1] = generate_ar(local, reqs[1]);
  ASSERT_TRUE(single[1].stopped_by_eog);
  ASSERT_LE(single[1].tokens.size(), 5u);

  for (size_t b : {1, 3, 4}) {
    CountingTarget target(local);
    const std::span<const GenerationRequest> batch(reqs.data(), b);
    std::vector<std::pair<size_t, int32_t>> streamed;
    const auto res = generate_ar_batch(target, batch, [&](size_t i, int32_t tok) {
      streamed.emplace_back(i, tok);
      return true;
    });
    ASSERT_EQ(res.size(), b);
    size_t longest = 0, streamed_total = 0;
    for (size_t i = 0; i < b; ++i) {
      EXPECT_EQ(res[i].tokens, single[i].tokens) << "B = " << b << ", request " << i;
      EXPECT_EQ(res[i].stopped_by_eog, single[i].stopped_by_eog);
      EXPECT_EQ(res[i].forwards, single[i].forwards);
      EXPECT_EQ(res[i].prompt_tokens, static_cast<int64_t>(kPrompts[i].size()));
      longest = std::max(longest, res[i].tokens.size());
      streamed_total += res[i].tokens.size();
      std::vector<int32_t> mine;
      for (const auto& [r, tok] : streamed)
        if (r == i) mine.push_back(tok);
      EXPECT_EQ(mine, res[i].tokens) << "the callback saw request " << i << "'s tokens in order";
    }
    EXPECT_EQ(streamed.size(), streamed_total);
    // One prefill forward per request (prompts < 512 tokens), then one forward per step after
    // the first token, over the requests still generating: as many as the longest needs.
    ASSERT_EQ(target.calls.size(), b + (longest - 1));
    for (size_t step = 1; step < longest; ++step) {
      size_t want = 0;  // requests that still need a token after this step
      for (size_t i = 0; i < b; ++i) want += res[i].tokens.size() > step ? 1 : 0;
      const auto& c = target.calls[b + step - 1];
      EXPECT_EQ(c.rows, want) << "step " << step;
      EXPECT_EQ(c.seqs, want) << "step " << step;
    }
    EXPECT_EQ(target.released, static_cast<int64_t>(b));
    EXPECT_EQ(e.kv->pages_in_use(), 0) << "every sequence released";
  }
}

TEST(GenerateArBatch, GreedyEqualsSingleRuns) { expect_batch_equals_single(SamplerConfig{}); }

TEST(GenerateArBatch, SampledEqualsSingleRuns) {
  expect_batch_equals_single(SamplerConfig{.temperature = 0.9f, .top_p = 0.95f, .seed = 5});
}

TEST(GenerateArBatch, ZeroBudgetAndEmptyBatch) {
  Engine e;
  LocalTarget t(*e.model, *e.kv);
  const std::vector<GenerationRequest> reqs = {request(kPrompts[1], 0), request(kPrompts[2], 3)};
  const auto res = generate_ar_batch(t, reqs);
  EXPECT_TRUE(res[0].tokens.empty());
  EXPECT_EQ(res[1].tokens, generate_ar(t, reqs[1]).tokens);
  EXPECT_TRUE(generate_ar_batch(t, {}).empty());
  EXPECT_EQ(e.kv->pages_in_use(), 0);
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// 64 positions = 4 pages of 16. Three requests of 10 + 7 = 17 positions (51 in all) need two
// pages each: 6 pages do not fit, although 51 positions would.
TEST(GenerateArBatch, ABatchThatDoesNotFitIsRefusedBeforeAnyWork) {
  Engine e(64);
  LocalTarget t(*e.model, *e.kv);
  CountingTarget counting(t);
  const std::vector<int32_t> prompt(10, 7);
  const std::vector<GenerationRequest> reqs(3, request(prompt, 7));
  const std::string msg = error_of([&] { generate_ar_batch(counting, reqs); });
  EXPECT_NE(msg.find("a batch of 3 requests needs 51 KV positions at once (6 pages of 16"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("holds 64 positions (4 pages)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--ctx-size"), std::string::npos) << msg;
  EXPECT_TRUE(counting.calls.empty()) << "refused before any forward";
  EXPECT_EQ(e.kv->pages_in_use(), 0);

  // Two of them fit (4 pages), and run.
  EXPECT_EQ(generate_ar_batch(t, {reqs.data(), 2}).size(), 2u);

  // One request too long for the context on its own: named by its index in the batch.
  std::vector<GenerationRequest> bad = {request(prompt, 7), request(prompt, 60)};
  const std::string one = error_of([&] { generate_ar_batch(t, bad); });
  EXPECT_NE(one.find("request 1 of the batch: prompt (10 tokens) + -n 60 = 70 exceeds the context "
                     "of 64 tokens"),
            std::string::npos)
      << one;
  bad[1] = request({}, 3);
  EXPECT_NE(error_of([&] { generate_ar_batch(t, bad); }).find("request 1 of the batch: the prompt "
                                                              "is empty"),
            std::string::npos);
  // A single request keeps the message it always had (no batch prefix).
  EXPECT_EQ(error_of([&] { generate_ar(t, request(prompt, 60)); })
                .find("prompt (10 tokens) + -n 60 = 70 exceeds the context of 64 tokens"),
            0u);
}

}  // namespace
}  // namespace ssd
