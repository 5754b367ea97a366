// Our transformer on the real default model (SmolLM2-135M-Instruct Q4_1) against two references
// recorded by tests/reference/record_llama_cpp_logits.py into tests/reference/data/
// llama_cpp_logits.json (4 prompts: ChatML chat, Python code, math, JSON; ids from llama.cpp's own
// tokenizer, 28-46 tokens):
//   - llama.cpp (PyPI llama-cpp-python 0.3.36), an implementation no one on this team wrote;
//   - "float64": an exact float64 numpy forward (tests/reference/numpy_llama_forward.py) over
//     weights decoded by the PyPI gguf package.
// Every other engine test uses tiny random models; this checks that the whole forward on a real
// model (GGUF, Q4_1/Q8_0 decode, RoPE layout, GQA, norms, tied LM head, KV-cache decode) means
// what llama.cpp means by it. Recorded per prompt: logits at 3 positions (first, middle, last) for
// the reference's top-20 ids plus 50 fixed pseudo-random ids (the tail), and a 32-token greedy
// continuation with the top-2 logits of every step.
//
// Needs SSD_MODEL (skips visibly when unset/missing, or when it is not the recorded model file)
// and SSD_SOURCE_DIR (set by ctest). With SSD_LLAMA_CPP_LIVE=1 (the optional ctest entry
// engine_reference.llama_cpp_live, tests/reference/CMakeLists.txt) the llama.cpp part is
// re-recorded into a temp file first; it skips visibly when python3 cannot import llama_cpp.
//
// Both references differ from us by about the same thing. Our matmuls on block-quantized weights
// (all of this model's: Q4_1, and Q8_0 for the tied embedding / LM head) round the activations
// entering them to 8 bits, one scale per 32 values (kernels/cpu/act_q8.h), and so does llama.cpp
// (Q8_1/Q8_0 activations); the float64 forward does not. Each rounding is harmless alone, but
// the differences grow through 30 layers, and two 8-bit forwards with slightly different
// rounding details (llama.cpp rounds half away from zero and takes its scale's inverse; ours
// rounds half to even from 127 / amax) drift apart as far as either does from float64.
// Tolerances, measured when written (12 positions x 70 logits, 4 x 32 greedy steps):
//   vs float64: max |ours - float64| = 2.48 (json position 16; elsewhere <= 0.9), mean 0.310,
//     max spread 1.60 (spread: max - min of (ours - ref) over a row's recorded ids; part of the
//     difference is a per-row offset that does not change probabilities); llama.cpp's own
//     distance to float64 is of the same size (max 1.39, mean 0.252). Top-1 equal at 12/12
//     positions, top-20 overlap >= 18. Greedy: chat, code and json 32/32, math 1/32 (after a
//     step whose float64 top-2 margin is under kSpread).
//   vs llama.cpp: max |ours - llama.cpp| = 2.36 (json position 16), mean 0.267, max spread 2.11
//     (with float32 activations, before: 1.39, 0.252 and 1.94). Top-1 equal at 10/12 positions;
//     the 2 misses (code 27, json 16) have llama.cpp top-2 margins 0.068 and 0.254. Top-20
//     overlap >= 19. Free-running greedy: chat, math and json 32/32, code 0/32 (llama.cpp departs
//     from float64's greedy at its step 0, top-2 margin 0.068). Teacher-forced on llama.cpp's
//     greedy tokens: our argmax equals llama.cpp's at 126/128 steps, the 2 misses at llama.cpp
//     margins 0.068 and 0.010; llama.cpp's top-1 logit within 0.48 of ours.
//   Json position 16 is where every forward disagrees most (the one logit row most sensitive to
//   small perturbations); two orders of the same float32 operations in our kernels measured 1.85
//   and 2.48 there. Bounds, the same for both references: kMaxDiff = 4.0 (1.6x the worst
//   measured), kSpread = 4.0 (1.9x); top-1 must be equal where the reference's top-2 margin is at
//   least kSpread, and greedy continuations equal up to the reference's first step with a margin
//   under kSpread; kMinTop20Overlap = 15 (a swap or three among the closely spaced logits at
//   20th place is expected, a real bug scrambles the set); teacher-forced agreement >=
//   kMinForcedAgreement = 115/128 overall (13 misses allowed: near-ties flip either way), with
//   equality required at every step whose llama.cpp margin is >= kSpread (31 of 128).
//   Loose, but still a real check: in the numpy forward, RoPE on the wrong pair layout moves the
//   logits by 21 from llama.cpp's and a wrong RoPE base (1e4 for 1e5) by 5.2.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/backend/backend.h"
#include "runtime/model/transformer.h"

namespace ssd {
namespace {

constexpr double kMaxDiff = 4.0;  // the bounds are explained at the top of the file
constexpr double kSpread = 4.0;
constexpr int kMinTop20Overlap = 15;
constexpr int kMinForcedAgreement = 115;  // of 128 teacher-forced steps

using nlohmann::json;

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

bool file_exists(const std::string& p, int64_t* size = nullptr) {
  struct stat st{};
  if (p.empty() || ::stat(p.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  if (size) *size = st.st_size;
  return true;
}

// Indices of the k largest values, largest first (ties by lower id, as numpy's stable argsort).
std::vector<int32_t> top_k(const float* row, int64_t n, int k) {
  std::vector<int32_t> idx(static_cast<size_t>(n));
  std::iota(idx.begin(), idx.end(), 0);
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int32_t a, int32_t b) {
    return row[a] > row[b] || (row[a] == row[b] && a < b);
  });
  idx.resize(static_cast<size_t>(k));
  return idx;
}

// One recorded position compared with our logits row.
struct RowStats {
  double max_diff = 0;  // max |ours - ref| over the recorded ids
  double spread = 0;    // max - min of (ours - ref) over the recorded ids
  double sum_diff = 0;
  int count = 0;
  bool top1_equal = false;
  double ref_margin = 0;  // reference's top-1 minus top-2 logit
  int overlap = 0;        // |our top-20 & reference top-20|
};

RowStats compare_row(const float* ours, int64_t vocab, const json& rec,
                     const std::vector<int32_t>& tail_ids) {
  RowStats st;
  std::vector<int32_t> ref_top;
  double lo = 1e30, hi = -1e30;
  auto account = [&](int32_t id, double ref) {
    const double d = ours[id] - ref;
    st.max_diff = std::max(st.max_diff, std::abs(d));
    st.sum_diff += std::abs(d);
    ++st.count;
    lo = std::min(lo, d);
    hi = std::max(hi, d);
  };
  for (const auto& pair : rec.at("top")) {
    ref_top.push_back(pair[0].get<int32_t>());
    account(pair[0].get<int32_t>(), pair[1].get<double>());
  }
  const auto& tail = rec.at("tail");
  for (size_t j = 0; j < tail_ids.size(); ++j) account(tail_ids[j], tail.at(j).get<double>());
  st.spread = hi - lo;
  st.ref_margin = rec.at("top")[0][1].get<double>() - rec.at("top")[1][1].get<double>();
  const auto our_top = top_k(ours, vocab, static_cast<int>(ref_top.size()));
  st.top1_equal = our_top[0] == ref_top[0];
  const std::set<int32_t> ref_set(ref_top.begin(), ref_top.end());
  st.overlap = static_cast<int>(
      std::count_if(our_top.begin(), our_top.end(), [&](int32_t t) { return ref_set.count(t); }));
  return st;
}

// Greedy steps are recorded as [top1 id, top1 logit, top2 id, top2 logit].
double step_margin(const json& step) { return step[1].get<double>() - step[3].get<double>(); }

// The first step whose reference top-2 margin is under `tie`: the argmax may flip from there on.
size_t first_near_tie(const json& greedy, double tie) {
  for (size_t t = 0; t < greedy.size(); ++t)
    if (step_margin(greedy[t]) < tie) return t;
  return greedy.size();
}

// The fixture, loaded (or, live, recorded) once per process: recording takes a while.
struct Fixture {
  json data;
  std::string skip;   // non-empty: skip every test with this reason
  std::string error;  // non-empty: fail every test with this message
};

const Fixture& load_fixture(const std::string& model_path, int64_t model_bytes) {
  static const Fixture fx = [&] {
    Fixture f;
    const std::string src = env_or_empty("SSD_SOURCE_DIR");
    if (src.empty()) {
      f.skip = "SSD_SOURCE_DIR unset (run through ctest)";
      return f;
    }
    std::string path = src + "/tests/reference/data/llama_cpp_logits.json";
    if (env_or_empty("SSD_LLAMA_CPP_LIVE") == "1") {
      const std::string py =
          env_or_empty("SSD_PYTHON").empty() ? "python3" : env_or_empty("SSD_PYTHON");
      path = ::testing::TempDir() + "ssd_llama_cpp_logits_live.json";
      const std::string cmd = "\"" + py + "\" \"" + src +
                              "/tests/reference/record_llama_cpp_logits.py\" --no-float64 \"" +
                              model_path + "\" \"" + path + "\"";
      std::printf("[ llama.cpp ] recording live: %s\n", cmd.c_str());
      std::fflush(stdout);
      const int rc = std::system(cmd.c_str());
      const int code = rc == -1 ? -1 : WEXITSTATUS(rc);
      if (code == 77 || code == 127) {
        f.skip = "python3 with llama-cpp-python (PyPI) is not available: " + cmd;
        return f;
      }
      if (code != 0) {
        f.error = "llama.cpp recording failed: " + cmd;
        return f;
      }
    }
    std::ifstream in(path);
    if (!in) {
      f.error = "cannot open " + path;
      return f;
    }
    f.data = json::parse(in);
    if (env_or_empty("SSD_LLAMA_CPP_LIVE") == "1") std::remove(path.c_str());
    if (f.data.at("model_bytes").get<int64_t>() != model_bytes)
      f.skip = "SSD_MODEL (" + model_path + ", " + std::to_string(model_bytes) +
               " bytes) is not the model the fixture was recorded on (" +
               f.data.at("model_file").get<std::string>() + ")";
    return f;
  }();
  return fx;
}

class LlamaCppReference : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string model_path = env_or_empty("SSD_MODEL");
    int64_t model_bytes = 0;
    if (!file_exists(model_path, &model_bytes))
      GTEST_SKIP() << "SSD_MODEL is unset or missing (set it to the SmolLM2-135M-Instruct GGUF)";
    const Fixture& f = load_fixture(model_path, model_bytes);
    if (!f.skip.empty()) GTEST_SKIP() << f.skip;
    ASSERT_TRUE(f.error.empty()) << f.error;
    fx_ = &f.data;
    tail_ids_ = fx_->at("tail_ids").get<std::vector<int32_t>>();

    file_ = std::make_unique<ModelFile>(ModelFile::open(model_path));
    ASSERT_EQ(file_->config().vocab, fx_->at("n_vocab").get<int64_t>());
    backend_ = make_cpu_backend(2);
    model_ = std::make_unique<Transformer>(*file_, *backend_);
    kv_ = std::make_unique<KvCache>(model_->kv_config(512));
  }
  int64_t vocab() const { return file_->config().vocab; }
  bool has_float64() const { return fx_->at("sequences")[0].contains("float64"); }

  // Our logits at the sequence's recorded positions: [3, vocab].
  ForwardResult prefill_positions(const json& seq) {
    const auto tokens = seq.at("tokens").get<std::vector<int32_t>>();
    SeqId s = kv_->create();
    Batch b = Batch::sequence(s, tokens, 0);
    b.logits_rows.clear();
    for (const auto& p : seq.at("positions")) b.logits_rows.push_back(p.at("pos").get<int32_t>());
    ForwardResult r = model_->forward(b, *kv_);
    kv_->release(s);
    return r;
  }

  // Decodes n tokens after the prompt one at a time through the KV cache. Feeds our own argmax
  // (forced empty) or the forced tokens; returns every step's logits row.
  std::vector<std::vector<float>> decode(const json& seq, size_t n,
                                         const std::vector<int32_t>& forced = {}) {
    const auto tokens = seq.at("tokens").get<std::vector<int32_t>>();
    SeqId s = kv_->create();
    ForwardResult r = model_->forward(Batch::sequence(s, tokens, 0), *kv_);
    int32_t pos = static_cast<int32_t>(tokens.size());
    std::vector<std::vector<float>> rows;
    for (size_t t = 0; t < n; ++t) {
      rows.emplace_back(r.logits_row(0), r.logits_row(0) + vocab());
      const int32_t next = forced.empty() ? top_k(rows.back().data(), vocab(), 1)[0] : forced[t];
      if (t + 1 < n) r = model_->forward(Batch::sequence(s, {next}, pos++), *kv_);
    }
    kv_->release(s);
    return rows;
  }

  const json* fx_ = nullptr;
  std::vector<int32_t> tail_ids_;
  std::unique_ptr<ModelFile> file_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Transformer> model_;
  std::unique_ptr<KvCache> kv_;
};

TEST_F(LlamaCppReference, LogitsMatchFloat64Reference) {
  if (!has_float64()) GTEST_SKIP() << "fixture has no float64 section (live recording)";
  double worst = 0, worst_spread = 0, sum = 0;
  int count = 0, min_overlap = 20;
  for (const auto& seq : fx_->at("sequences")) {
    const ForwardResult r = prefill_positions(seq);
    const auto& recs = seq.at("float64").at("positions");
    for (size_t i = 0; i < recs.size(); ++i) {
      const std::string where = seq.at("name").get<std::string>() + " position " +
                                std::to_string(recs[i].at("pos").get<int>());
      const RowStats st = compare_row(r.logits_row(i), vocab(), recs[i], tail_ids_);
      EXPECT_LE(st.max_diff, kMaxDiff) << where;
      EXPECT_LE(st.spread, kSpread) << where;
      if (st.ref_margin >= kSpread) {
        EXPECT_TRUE(st.top1_equal) << where;
      }
      EXPECT_GE(st.overlap, kMinTop20Overlap) << where;
      worst = std::max(worst, st.max_diff);
      worst_spread = std::max(worst_spread, st.spread);
      sum += st.sum_diff;
      count += st.count;
      min_overlap = std::min(min_overlap, st.overlap);
      std::printf("[ float64   ] %-16s max |diff| %.5f, spread %.4f, top-1 %s (float64 margin "
                  "%.3f), top-20 overlap %d\n",
                  where.c_str(), st.max_diff, st.spread, st.top1_equal ? "equal" : "DIFFERS",
                  st.ref_margin, st.overlap);
    }
  }
  std::printf("[ float64   ] overall max |diff| %.5f, mean %.5f over %d logits, max spread %.4f, "
              "min overlap %d\n",
              worst, sum / count, count, worst_spread, min_overlap);
}

TEST_F(LlamaCppReference, LogitsMatchLlamaCpp) {
  std::printf("[ llama.cpp ] reference: llama-cpp-python %s\n",
              fx_->at("llama_cpp_python_version").get<std::string>().c_str());
  double worst = 0, worst_spread = 0, sum = 0;
  int count = 0, min_overlap = 20, top1 = 0, rows = 0;
  for (const auto& seq : fx_->at("sequences")) {
    const ForwardResult r = prefill_positions(seq);
    const auto& recs = seq.at("positions");
    for (size_t i = 0; i < recs.size(); ++i) {
      const std::string where = seq.at("name").get<std::string>() + " position " +
                                std::to_string(recs[i].at("pos").get<int>());
      const RowStats st = compare_row(r.logits_row(i), vocab(), recs[i], tail_ids_);
      EXPECT_LE(st.max_diff, kMaxDiff) << where;
      EXPECT_LE(st.spread, kSpread) << where;
      if (st.ref_margin >= kSpread) {
        EXPECT_TRUE(st.top1_equal) << where;
      }
      EXPECT_GE(st.overlap, kMinTop20Overlap) << where;
      worst = std::max(worst, st.max_diff);
      worst_spread = std::max(worst_spread, st.spread);
      sum += st.sum_diff;
      count += st.count;
      min_overlap = std::min(min_overlap, st.overlap);
      top1 += st.top1_equal;
      ++rows;
      std::printf("[ llama.cpp ] %-16s max |diff| %.4f, spread %.4f, top-1 %s (llama.cpp margin "
                  "%.3f), top-20 overlap %d\n",
                  where.c_str(), st.max_diff, st.spread, st.top1_equal ? "equal" : "DIFFERS",
                  st.ref_margin, st.overlap);
    }
  }
  std::printf("[ llama.cpp ] overall max |diff| %.4f, mean %.4f over %d logits, max spread %.4f, "
              "top-1 equal %d/%d, min top-20 overlap %d\n",
              worst, sum / count, count, worst_spread, top1, rows, min_overlap);
}

// Our free-running greedy continuation against both references' greedy continuations.
TEST_F(LlamaCppReference, GreedyContinuations) {
  for (const auto& seq : fx_->at("sequences")) {
    const auto name = seq.at("name").get<std::string>();
    const auto rows = decode(seq, seq.at("greedy").size());
    auto check = [&](const char* ref_name, const json& greedy, double tol, double tie) {
      const size_t must = first_near_tie(greedy, tie);
      size_t matched = 0;
      double worst = 0;
      for (; matched < greedy.size(); ++matched) {
        const float* row = rows[matched].data();
        const int32_t ours = top_k(row, vocab(), 1)[0], theirs = greedy[matched][0].get<int32_t>();
        if (ours != theirs) break;
        const double d = std::abs(row[theirs] - greedy[matched][1].get<double>());
        worst = std::max(worst, d);
        EXPECT_LE(d, tol) << name << " vs " << ref_name << ", greedy step " << matched;
      }
      EXPECT_GE(matched, must) << name << " vs " << ref_name << ": greedy diverges at step "
                               << matched << " before the first near-tie (step " << must << ")";
      std::printf("[ greedy    ] %-5s vs %-9s: %2zu/%zu equal%s; first near-tie (margin < %.4f) at "
                  "step %zu; max |diff| of top-1 logit %.5f\n",
                  name.c_str(), ref_name, matched, greedy.size(),
                  matched < greedy.size() ? " then diverged" : "", tie, must, worst);
    };
    if (seq.contains("float64"))
      check("float64", seq.at("float64").at("greedy"), kMaxDiff, kSpread);
    check("llama.cpp", seq.at("greedy"), kMaxDiff, kSpread);
  }
}

// Decoding along llama.cpp's own greedy path (its tokens fed to us), so every one of the 32 steps
// of every prompt is compared however early the free-running continuations part.
TEST_F(LlamaCppReference, TeacherForcedOnLlamaCppPath) {
  int agree = 0, steps = 0, decisive = 0;
  double worst = 0;
  for (const auto& seq : fx_->at("sequences")) {
    const auto name = seq.at("name").get<std::string>();
    const auto& greedy = seq.at("greedy");
    std::vector<int32_t> path;
    for (const auto& g : greedy) path.push_back(g[0].get<int32_t>());
    const auto rows = decode(seq, path.size(), path);
    int seq_agree = 0;
    for (size_t t = 0; t < path.size(); ++t) {
      const float* row = rows[t].data();
      const bool equal = top_k(row, vocab(), 1)[0] == path[t];
      const double d = std::abs(row[path[t]] - greedy[t][1].get<double>());
      worst = std::max(worst, d);
      EXPECT_LE(d, kMaxDiff) << name << " step " << t;
      if (step_margin(greedy[t]) >= kSpread) {
        ++decisive;
        EXPECT_TRUE(equal) << name << " step " << t << ": llama.cpp margin "
                           << step_margin(greedy[t]);
      }
      if (!equal)
        std::printf("[ forced    ] %-5s step %2zu: argmax differs, llama.cpp's top-2 margin %.4f\n",
                    name.c_str(), t, step_margin(greedy[t]));
      seq_agree += equal;
    }
    agree += seq_agree;
    steps += static_cast<int>(path.size());
    std::printf("[ forced    ] %-5s: our argmax = llama.cpp's at %d/%zu steps\n", name.c_str(),
                seq_agree, path.size());
  }
  EXPECT_GE(agree, kMinForcedAgreement * steps / 128);
  std::printf("[ forced    ] total %d/%d (%d steps with llama.cpp margin >= %.1f, all required), "
              "max |diff| of llama.cpp's top-1 logit %.4f\n",
              agree, steps, decisive, kSpread, worst);
}

}  // namespace
}  // namespace ssd
