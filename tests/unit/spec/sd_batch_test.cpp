// Batched speculative decoding (generate_sd_batch) on tiny random models, and on the real default
// model (env SSD_MODEL; skipped visibly without it):
//   - greedy: every request of a batch of B = 1, 3, 4 (prompt lengths 9, 7, 23, 14; budgets 40,
//     17, 29, 8; one request ended by a stop token) emits exactly its AR tokens, with the n-gram
//     drafter, the suffix drafter (its cache of earlier requests growing across the batches),
//     the target drafting for itself and a weaker 1-layer draft model, at K = 2 and 4, and with
//     --k auto (a cheap drafter, n-gram or suffix, is asked for the whole range each round);
//     the target runs ONE verification forward per round over the requests still generating; the
//     drafter sees request i as sequence i, its committed context is prompt + output, and every
//     target and drafter sequence is released;
//   - sampled: each request's tokens equal its single-request generate_sd run (same Philox
//     streams), and the output law passes the chi-square fit the verifier's exactness tests use
//     (alpha = 1e-4, chi_square.h): the joint law of the first four tokens at top-k 2, computed
//     exactly from the target, against 1000 generations run 16 at a time, with a chain and with a
//     two-branch tree, with a draft model and with the suffix drafter. A drafter that lies about
//     its q (proposes its likeliest token but reports the q it would have sampled from) fails the
//     same fit, so the fit can see a wrong law;
//   - a batch that does not fit the target's cache is refused before any work.
// Token ids are compared exactly (see generation_batch_test.cpp in tests/unit/engine for why
// batched rows cannot flip these decisions).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <map>

#include "runtime/core/error.h"
#include "runtime/drafters/model_drafter.h"
#include "runtime/drafters/ngram_drafter.h"
#include "runtime/drafters/suffix_drafter.h"
#include "runtime/spec/sd_generation.h"
#include "tests/support/counting_target.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tiny_model.h"
#include "tests/unit/spec/chi_square.h"
#include "tests/unit/spec/drafting_fixture.h"

namespace ssd {
namespace {

using test::CountingTarget;
using test::TempDir;
using test::drafting::Engine;
using test::drafting::gguf_vocab;

// Forwards to `inner` and keeps, per sequence, the context it was given (prompt + commits), the
// finished sequences' final contexts, and the sequences asked for in each draft() call.
class TrackingDrafter final : public Drafter {
 public:
  explicit TrackingDrafter(Drafter& inner) : inner_(inner) {}
  std::string name() const override { return inner_.name(); }
  bool drafts_cheaply() const override { return inner_.drafts_cheaply(); }
  void start(int32_t seq, std::span<const int32_t> p) override {
    context[seq].assign(p.begin(), p.end());
    prompt_len[seq] = p.size();
    inner_.start(seq, p);
  }
  void commit(int32_t seq, std::span<const int32_t> t) override {
    context.at(seq).insert(context.at(seq).end(), t.begin(), t.end());
    inner_.commit(seq, t);
  }
  std::vector<DraftTree> draft(std::span<const DraftRequest> r) override {
    std::vector<int32_t> seqs;
    for (const DraftRequest& q : r) {
      seqs.push_back(q.seq);
      const auto emitted = static_cast<int64_t>(context.at(q.seq).size() - prompt_len.at(q.seq));
      asked.push_back({q.seq, emitted, q.k});
    }
    draft_calls.push_back(seqs);
    return inner_.draft(r);
  }
  void observe(const DraftOutcome& o) override { inner_.observe(o); }
  void finish(int32_t seq) override {
    finished[seq] = context.at(seq);
    context.erase(seq);
    inner_.finish(seq);
  }
  std::map<int32_t, std::vector<int32_t>> context, finished;
  std::map<int32_t, size_t> prompt_len;
  std::vector<std::vector<int32_t>> draft_calls;
  struct Asked {
    int32_t seq;
    int64_t emitted;  // tokens the sequence had emitted when the draft was asked for
    int32_t k;
  };
  std::vector<Asked> asked;

 private:
  Drafter& inner_;
};

// Proposes, at every node, the likeliest token of the q the inner drafter drew from, and reports
// that q: the draft is not drawn from the q it claims, which breaks exactness.
class LyingDrafter final : public Drafter {
 public:
  explicit LyingDrafter(Drafter& inner) : inner_(inner) {}
  std::string name() const override { return "liar"; }
  void start(int32_t seq, std::span<const int32_t> p) override { inner_.start(seq, p); }
  void commit(int32_t seq, std::span<const int32_t> t) override { inner_.commit(seq, t); }
  std::vector<DraftTree> draft(std::span<const DraftRequest> r) override {
    std::vector<DraftTree> trees = inner_.draft(r);
    for (DraftTree& t : trees)
      for (size_t i = 0; i < t.size(); ++i) {
        const auto& q = t.q[i].tokens;
        t.tokens[i] = std::max_element(q.begin(), q.end(), [](const auto& a, const auto& b) {
                        return a.prob < b.prob;
                      })->id;
      }
    return trees;
  }
  void finish(int32_t seq) override { inner_.finish(seq); }

 private:
  Drafter& inner_;
};

// Target: the spec tests' small 2-layer Llama; draft: the same seed with 1 layer (it shares the
// embedding, head and first block, so it agrees with the target part of the time).
struct World {
  TempDir tmp;
  std::string target_path, draft_path;
  std::unique_ptr<Engine> engine;
  std::unique_ptr<LocalTarget> target;
  explicit World(int64_t kv_tokens = 1024) {
    test::TinyModelSpec t = test::drafting::small_spec();
    target_path = test::write_tiny_gguf(t, tmp.file("target.gguf"));
    t.n_layers = 1;
    draft_path = test::write_tiny_gguf(t, tmp.file("draft.gguf"));
    engine = std::make_unique<Engine>(target_path, 1, kv_tokens);
    target = std::make_unique<LocalTarget>(*engine->model, *engine->kv);
  }
  std::unique_ptr<Drafter> drafter(const std::string& kind) {
    if (kind == "ngram") return std::make_unique<NgramDrafter>(NgramOptions{});
    if (kind == "suffix") return std::make_unique<SuffixDrafter>(SuffixDrafterOptions{});
    ModelFile f = ModelFile::open(kind == "self" ? target_path : draft_path);
    ModelDrafterOptions o;
    o.target_vocab = gguf_vocab(engine->file);
    o.draft_vocab = gguf_vocab(f);
    o.target_logits = engine->vocab();
    return std::make_unique<ModelDrafter>(std::move(f), *engine->backend, o);
  }
};

GenerationRequest request(std::vector<int32_t> prompt, int64_t n, const SamplerConfig& s,
                          uint64_t stream) {
  GenerationRequest r;
  r.prompt = std::move(prompt);
  r.max_new_tokens = n;
  r.sampler = s;
  r.stream = stream;
  return r;
}

// Prompts of lengths 9, 7, 23 and 14 (the last two repetitive, so the n-gram drafter finds
// matches), budgets 40, 17, 29 and 8.
std::vector<GenerationRequest> requests(const SamplerConfig& s) {
  const std::vector<std::vector<int32_t>> prompts = {
      {5, 77, 258, 1, 140, 33, 200, 9, 101},
      {260, 12, 12, 99, 4, 180, 65},
      {3, 1, 4, 1, 5, 9, 2, 6, 3, 1, 4, 1, 5, 9, 2, 6, 3, 1, 4, 1, 5, 9, 2},
      {70, 71, 72, 73, 74, 70, 71, 72, 73, 74, 70, 71, 72, 73},
  };
  const std::vector<int64_t> budgets = {40, 17, 29, 8};
  std::vector<GenerationRequest> r;
  for (size_t i = 0; i < prompts.size(); ++i)
    r.push_back(request(prompts[i], budgets[i], s, /*stream=*/10 + i));
  return r;
}

struct GreedyCase {
  std::string drafter;
  int32_t k;
  bool auto_k = false;  // --k auto over 0..k (lengths from this run's timings: any is exact)
};
void PrintTo(const GreedyCase& c, std::ostream* os) {
  *os << c.drafter << (c.auto_k ? " auto K <= " : " K = ") << c.k;
}

class SdBatchGreedy : public testing::TestWithParam<GreedyCase> {};

TEST_P(SdBatchGreedy, EveryRequestEqualsItsArRun) {
  World w;
  auto inner = w.drafter(GetParam().drafter);
  const int32_t k = GetParam().k;
  std::vector<GenerationRequest> reqs = requests({});
  std::vector<GenerationResult> ar;
  for (const auto& r : reqs) ar.push_back(generate_ar(*w.target, r));
  reqs[1].stop_ids = {ar[1].tokens[9]};  // request 1 ends at (or before) its 10th token
  ar[1] = generate_ar(*w.target, reqs[1]);
  ASSERT_TRUE(ar[1].stopped_by_eog);

  for (size_t b : {1, 3, 4}) {
    SCOPED_TRACE("B = " + std::to_string(b));
    TrackingDrafter d(*inner);
    CountingTarget target(*w.target);
    const SdOptions opts{.k = k, .width = 1, .auto_k = GetParam().auto_k};
    const auto res = generate_sd_batch(target, d, {reqs.data(), b}, opts);
    ASSERT_EQ(res.requests.size(), b);
    int64_t rounds = 0, most = 0, accepted = 0;
    for (size_t i = 0; i < b; ++i) {
      const SdResult& r = res.requests[i];
      EXPECT_EQ(r.gen.tokens, ar[i].tokens) << "request " << i;
      EXPECT_EQ(r.gen.stopped_by_eog, ar[i].stopped_by_eog) << "request " << i;
      EXPECT_EQ(r.stats.rounds, r.stats.forwards);
      EXPECT_EQ(r.gen.forwards, r.stats.rounds);
      rounds += r.stats.rounds;
      most = std::max(most, r.stats.rounds);
      accepted += r.stats.accepted;
      // The drafter's context at finish: the prompt and every emitted token.
      std::vector<int32_t> ctx = reqs[i].prompt;
      ctx.insert(ctx.end(), r.gen.tokens.begin(), r.gen.tokens.end());
      EXPECT_EQ(d.finished.at(static_cast<int32_t>(i)), ctx) << "request " << i;
      int64_t chosen = 0;
      for (int64_t c : r.stats.chosen_k_hist) chosen += c;
      EXPECT_EQ(chosen, r.stats.rounds) << "one chosen length per round";
      if (!opts.auto_k) EXPECT_GT(r.stats.chosen_k_hist.at(k), 0) << "fixed k: k asked";
      if (GetParam().drafter == "ngram" && !opts.auto_k) {  // deterministic: as alone
        const SdResult alone = generate_sd(*w.target, *inner, reqs[i], SdOptions{k, 1});
        EXPECT_EQ(r.stats.rounds, alone.stats.rounds) << "request " << i;
        EXPECT_EQ(r.stats.accepted, alone.stats.accepted) << "request " << i;
      }
    }
    EXPECT_TRUE(d.context.empty()) << "every drafter sequence finished";
    if (opts.auto_k && inner->drafts_cheaply()) {  // the whole range asked, the length chosen after
      for (const auto& a : d.asked)
        EXPECT_EQ(a.k, std::min<int64_t>(k, reqs[a.seq].max_new_tokens - a.emitted - 1))
            << "request " << a.seq << " after " << a.emitted << " tokens";
    }
    EXPECT_EQ(res.stats.rounds, rounds);
    EXPECT_EQ(res.stats.accepted, accepted);
    EXPECT_EQ(res.stats.forwards, most) << "one verification forward per round";
    // The target's verification forwards: one per round, over the requests still generating.
    const auto calls = target.masked_calls();
    ASSERT_EQ(static_cast<int64_t>(calls.size()), most);
    int64_t rows = 0;
    for (int64_t round = 1; round <= most; ++round) {
      size_t live = 0;
      for (size_t i = 0; i < b; ++i) live += res.requests[i].stats.rounds >= round ? 1 : 0;
      EXPECT_EQ(calls[round - 1].seqs, live) << "round " << round;
      rows += static_cast<int64_t>(calls[round - 1].rows);
    }
    EXPECT_EQ(res.stats.verified_rows, rows);
    // The round log (the outcome trace a bench writes): one record per sequence-round, in round
    // order, carrying each request's own rounds, acceptances and verified rows.
    ASSERT_EQ(static_cast<int64_t>(res.log.size()), rounds);
    std::vector<int64_t> log_rounds(b), log_accepted(b);
    int64_t log_rows = 0;
    for (size_t r = 0; r < res.log.size(); ++r) {
      const SdRoundRecord& x = res.log[r];
      ASSERT_TRUE(x.seq >= 0 && x.seq < static_cast<int32_t>(b));
      EXPECT_TRUE(x.round >= 0 && x.round < most);
      if (r > 0) EXPECT_GE(x.round, res.log[r - 1].round);
      EXPECT_TRUE(x.accepted >= 0 && x.accepted <= x.k && x.k <= k);
      log_rounds[x.seq]++;
      log_accepted[x.seq] += x.accepted;
      log_rows += 1 + x.k;
    }
    for (size_t i = 0; i < b; ++i) {
      EXPECT_EQ(log_rounds[i], res.requests[i].stats.rounds) << "request " << i;
      EXPECT_EQ(log_accepted[i], res.requests[i].stats.accepted) << "request " << i;
    }
    EXPECT_EQ(log_rows, rows);
    // The round times (`ssd bench --round-times`): one per forward, with its rows; the verify
    // times are the batch's, the draft times the rounds' draft calls.
    ASSERT_EQ(static_cast<int64_t>(res.round_times.size()), most);
    double verify_s = 0, draft_s = 0;
    int64_t emitted = 0, decoded = 0;  // every token but each request's first (the prefill's)
    for (const SdResult& r : res.requests) decoded += static_cast<int64_t>(r.gen.tokens.size()) - 1;
    for (int64_t round = 1; round <= most; ++round) {
      const SdRoundTime& t = res.round_times[round - 1];
      EXPECT_EQ(t.rows, static_cast<int64_t>(calls[round - 1].rows)) << "round " << round;
      EXPECT_GE(t.emitted, 1) << "round " << round;
      emitted += t.emitted;
      EXPECT_GE(t.draft_s, 0.0);
      EXPECT_GE(t.verify_s, 0.0);
      verify_s += t.verify_s;
      draft_s += t.draft_s;
    }
    EXPECT_DOUBLE_EQ(verify_s, res.stats.verify_s);
    EXPECT_EQ(emitted, decoded);
    EXPECT_LE(draft_s, res.stats.draft_s - res.drafter_start_s + 1e-12);
    EXPECT_GE(res.drafter_start_s, 0.0);
    EXPECT_LE(res.drafter_start_s, res.stats.draft_s);
    EXPECT_LE(static_cast<int64_t>(d.draft_calls.size()), most) << "at most one draft() a round";
    EXPECT_EQ(target.released, static_cast<int64_t>(b));
    EXPECT_EQ(w.engine->kv->pages_in_use(), 0);
    if (GetParam().drafter == "self") {  // the target's own greedy continuation: accepted whole
      EXPECT_EQ(res.stats.full_accepts + res.stats.empty_drafts, res.stats.rounds);
    }
    std::cout << "  B = " << b << ": " << most << " forwards, " << rounds << " sequence-rounds, "
              << res.stats.mean_acceptance_length() << " tokens per sequence-round\n";
  }
}

INSTANTIATE_TEST_SUITE_P(Drafters, SdBatchGreedy,
                         testing::Values(GreedyCase{"ngram", 2}, GreedyCase{"ngram", 4},
                                         GreedyCase{"suffix", 2}, GreedyCase{"suffix", 4},
                                         GreedyCase{"self", 2}, GreedyCase{"self", 4},
                                         GreedyCase{"draft", 2}, GreedyCase{"draft", 4},
                                         GreedyCase{"ngram", 6, true}, GreedyCase{"self", 6, true},
                                         GreedyCase{"suffix", 6, true},
                                         GreedyCase{"draft", 6, true}),
                         [](const testing::TestParamInfo<GreedyCase>& p) {
                           return p.param.drafter + (p.param.auto_k ? "_Auto" : "_K") +
                                  std::to_string(p.param.k);
                         });

TEST(SdBatchSampled, EveryRequestEqualsItsSingleRun) {
  World w;
  auto d = w.drafter("draft");
  const SamplerConfig s{.temperature = 0.9f, .top_p = 0.95f, .seed = 17};
  const std::vector<GenerationRequest> reqs = requests(s);
  for (const SdOptions opts : {SdOptions{3, 1}, SdOptions{2, 2}}) {
    const auto res = generate_sd_batch(*w.target, *d, reqs, opts);
    int64_t accepted = 0;
    for (size_t i = 0; i < reqs.size(); ++i) {
      const SdResult alone = generate_sd(*w.target, *d, reqs[i], opts);
      EXPECT_EQ(res.requests[i].gen.tokens, alone.gen.tokens)
          << "request " << i << ", K = " << opts.k << ", width " << opts.width;
      accepted += alone.stats.accepted;
    }
    EXPECT_GT(accepted, 0) << "some drafts accepted, so both verifier paths ran";
    EXPECT_LT(accepted, res.stats.drafted) << "some drafts rejected";
  }
}

// The exact law of the first four tokens of `prompt`: sum over prefixes of the product of the
// target's processed next-token distributions.
std::map<std::vector<int32_t>, double> exact_law(TargetModel& target,
                                                 const std::vector<int32_t>& prompt,
                                                 const SamplerConfig& s, size_t n) {
  std::map<std::vector<int32_t>, double> law = {{{}, 1.0}};
  const int32_t vocab = static_cast<int32_t>(target.config().vocab);
  for (size_t step = 0; step < n; ++step) {
    std::map<std::vector<int32_t>, double> next;
    for (const auto& [prefix, p] : law) {
      std::vector<int32_t> ctx = prompt;
      ctx.insert(ctx.end(), prefix.begin(), prefix.end());
      TargetSeqs seqs(target);
      const ForwardResult fr = target.forward(Batch::sequence(seqs.create(), ctx, 0));
      for (const TokenProb& tp : process(fr.logits_row(0), vocab, s).tokens) {
        std::vector<int32_t> longer = prefix;
        longer.push_back(tp.id);
        next[longer] += p * tp.prob;
      }
    }
    law = std::move(next);
  }
  return law;
}

// Runs `trials` requests of `prompt` (streams 0..trials-1), 16 to a batch, and fits the law of
// their four tokens.
spec_test::Fit fit_four_tokens(World& w, Drafter& d, const SdOptions& opts, int trials) {
  const SamplerConfig s{.temperature = 1.0f, .top_k = 2, .seed = 77};
  const std::vector<int32_t> prompt = {5, 77, 258, 1, 140, 33, 200, 9, 101};
  const auto law = exact_law(*w.target, prompt, s, 4);
  std::map<std::vector<int32_t>, int64_t> seen;
  constexpr int kBatch = 16;
  for (int first = 0; first < trials; first += kBatch) {
    std::vector<GenerationRequest> reqs;
    for (int i = first; i < std::min(trials, first + kBatch); ++i)
      reqs.push_back(request(prompt, 4, s, static_cast<uint64_t>(i)));
    for (const SdResult& r : generate_sd_batch(*w.target, d, reqs, opts).requests)
      seen[r.gen.tokens]++;
  }
  std::vector<int64_t> counts;
  std::vector<double> probs;
  for (const auto& [tokens, p] : law) {
    counts.push_back(seen.count(tokens) ? seen[tokens] : 0);
    probs.push_back(p);
    seen.erase(tokens);
  }
  int64_t outside = 0;  // sequences the law gives probability 0
  for (const auto& [tokens, c] : seen) outside += c;
  counts.push_back(outside);
  probs.push_back(0.0);
  return spec_test::chi_square_fit(counts, probs);
}

TEST(SdBatchSampled, OutputLawFitsTheTarget) {
  World w;
  auto d = w.drafter("draft");
  constexpr int kTrials = 1000;
  // --k auto: one length policy over all batches (its costs carry over), lengths 0..3.
  SpecLengthController length(SpecLengthOptions{.k_max = 3, .automatic = true});
  for (const SdOptions opts : {SdOptions{2, 1}, SdOptions{2, 2},
                               SdOptions{.k = 3, .auto_k = true, .length = &length}}) {
    const spec_test::Fit f = fit_four_tokens(w, *d, opts, kTrials);
    EXPECT_TRUE(f.pass()) << "width " << opts.width << ", auto " << opts.auto_k << ": "
                          << f.describe();
    EXPECT_GE(f.min_expected, 5.0) << "chi-square approximation needs expected counts >= 5";
    std::cout << "  width " << opts.width << (opts.auto_k ? ", k auto" : "") << ": "
              << f.describe() << "\n";
  }
  int64_t drafted_rounds = 0;
  for (size_t k = 1; k < length.histogram().size(); ++k) drafted_rounds += length.histogram()[k];
  EXPECT_GT(drafted_rounds, 0) << "k auto drafted in some rounds (the warm-up at least)";
  // The suffix drafter: one-hot drafts of what earlier requests of the same prompt emitted
  // most often (its cache fills as the batches finish), as a chain and as two branches.
  for (const SdOptions opts : {SdOptions{3, 1}, SdOptions{2, 2}}) {
    SuffixDrafter suffix(SuffixDrafterOptions{.min_prob = 0.05});
    const spec_test::Fit f = fit_four_tokens(w, suffix, opts, kTrials);
    EXPECT_TRUE(f.pass()) << "suffix, width " << opts.width << ": " << f.describe();
    EXPECT_GT(suffix.cache().documents_added(), kTrials - 1);
    std::cout << "  suffix, width " << opts.width << ": " << f.describe() << "\n";
  }
  LyingDrafter liar(*d);
  const spec_test::Fit bad = fit_four_tokens(w, liar, SdOptions{2, 1}, kTrials);
  EXPECT_FALSE(bad.pass()) << "a drafter lying about q must fail the fit: " << bad.describe();
  std::cout << "  lying drafter: " << bad.describe() << "\n";
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// 64 positions = 4 pages of 16: three requests of 10 + 5 tokens + K = 4 verified ahead need 19
// positions, two pages each.
TEST(SdBatch, ABatchThatDoesNotFitIsRefusedBeforeAnyWork) {
  World w(64);
  auto d = w.drafter("ngram");
  CountingTarget target(*w.target);
  const std::vector<GenerationRequest> reqs(3, request(std::vector<int32_t>(10, 7), 5, {}, 0));
  const std::string msg = error_of([&] { generate_sd_batch(target, *d, reqs, SdOptions{4, 1}); });
  EXPECT_NE(msg.find("a batch of 3 requests needs 57 KV positions at once (6 pages of 16: each "
                     "request's prompt + -n + 4 verified ahead), but the target's cache holds 64 "
                     "positions (4 pages)"),
            std::string::npos)
      << msg;
  EXPECT_TRUE(target.calls.empty());
  // Width 3 writes up to 2 x K positions ahead, and says so.
  const std::string wide = error_of([&] {
    generate_sd(target, *d, request(std::vector<int32_t>(10, 7), 50, {}, 0), SdOptions{4, 3});
  });
  EXPECT_NE(wide.find("prompt (10 tokens) + -n 50 + 8 positions verification writes ahead = 68 "
                      "exceeds the context of 64 tokens"),
            std::string::npos)
      << wide;
  EXPECT_NE(error_of([&] { generate_sd_batch(target, *d, reqs, SdOptions{0, 1}); }).find("--k 0"),
            std::string::npos);
  EXPECT_TRUE(target.calls.empty());
  EXPECT_EQ(generate_sd_batch(target, *d, {reqs.data(), 2}, SdOptions{4, 1}).requests.size(), 2u);
}

// ---- the real default model ----

std::string real_model() {
  const char* p = std::getenv("SSD_MODEL");
  return p && std::filesystem::exists(p) ? p : "";
}

// SmolLM2 token ids (ssd_tokenize) of "<|im_start|>user\nWhat is the capital of France?
// <|im_end|>\n<|im_start|>assistant\n" and the same around "Write a Python function that
// reverses a string.", and prefixes of them (10 and 5 tokens): prompt lengths 16, 19, 10, 5.
std::vector<GenerationRequest> real_requests() {
  const std::vector<int32_t> capital = {1,  4093, 198, 1780, 314, 260, 3575, 282,
                                        4649, 47, 2,   198,  1,   520, 9531, 198};
  const std::vector<int32_t> python = {1,  4093, 198, 19161, 253, 5905, 1517, 338, 10557, 266,
                                       253, 4928, 30,  2,     198, 1,    520,  9531, 198};
  const std::vector<std::vector<int32_t>> prompts = {capital, python,
                                                     {python.begin(), python.begin() + 10},
                                                     {capital.begin(), capital.begin() + 5}};
  const std::vector<int64_t> budgets = {24, 32, 20, 12};
  std::vector<GenerationRequest> r;
  for (size_t i = 0; i < prompts.size(); ++i) r.push_back(request(prompts[i], budgets[i], {}, i));
  return r;
}

// Greedy batches of the real model with `kind` ("ngram", "suffix" or "self") at each (K, B) of
// `runs`.
void real_model_batches(const std::string& kind,
                        const std::vector<std::pair<int32_t, size_t>>& runs) {
  const std::string path = real_model();
  if (path.empty()) GTEST_SKIP() << "set SSD_MODEL to the default model's GGUF to run this test";
  Engine e(path, 2, 1024);
  LocalTarget target(*e.model, *e.kv);
  std::unique_ptr<Drafter> d;
  if (kind == "ngram") {
    d = std::make_unique<NgramDrafter>(NgramOptions{});
  } else if (kind == "suffix") {
    d = std::make_unique<SuffixDrafter>(SuffixDrafterOptions{});
  } else {
    ModelFile f = ModelFile::open(path);
    ModelDrafterOptions o;
    o.target_vocab = gguf_vocab(e.file);
    o.draft_vocab = gguf_vocab(f);
    o.target_logits = e.vocab();
    o.kv_tokens = 1024;
    d = std::make_unique<ModelDrafter>(std::move(f), *e.backend, o);
  }
  const auto reqs = real_requests();
  std::vector<std::vector<int32_t>> ar;
  for (const auto& r : reqs) ar.push_back(generate_ar(target, r).tokens);
  for (const auto& [k, b] : runs) {
    const auto res = generate_sd_batch(target, *d, {reqs.data(), b}, SdOptions{k, 1});
    for (size_t i = 0; i < b; ++i)
      EXPECT_EQ(res.requests[i].gen.tokens, ar[i]) << kind << " K = " << k << " B = " << b
                                                   << " request " << i;
    std::cout << "  " << kind << " K = " << k << " B = " << b << ": " << res.stats.forwards
              << " forwards, mean acceptance length " << res.stats.mean_acceptance_length()
              << ", mean batch " << res.stats.mean_batch() << "\n";
  }
}

TEST(SdBatchRealModel, NgramGreedyEqualsAr) { real_model_batches("ngram", {{2, 4}, {4, 3}}); }

TEST(SdBatchRealModel, SuffixGreedyEqualsAr) {
  real_model_batches("suffix", {{2, 4}, {4, 3}, {6, 4}});
}

TEST(SdBatchRealModel, SelfDraftGreedyEqualsAr) {
  real_model_batches("self", {{2, 3}, {4, 4}, {4, 1}});
}

}  // namespace
}  // namespace ssd
