// DVI online learning raises the early-exit drafter's acceptance over a run (tiny model).
#include <gtest/gtest.h>

#include <cstdlib>
#include <algorithm>
#include <cmath>
#include <random>

#include "runtime/drafters/early_exit_drafter.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tiny_model.h"
#include "tests/unit/spec/drafting_fixture.h"

namespace ssd {
namespace {

using test::TempDir;
using test::drafting::Engine;

double env_or(const char* name, double def) {
  const char* v = std::getenv(name);
  return v ? std::atof(v) : def;
}

struct RunResult {
  std::vector<RoundRecord> rounds;
  DviStats stats;
};

RunResult run(Engine& e, int64_t L, bool learn, int prompts, int tokens, int32_t k) {
  EarlyExitOptions o;
  o.layers = L;
  o.online_learning = learn;
  o.lora.rank = static_cast<int32_t>(env_or("R", 8));
  o.dvi.capacity = 64;
  o.dvi.train_every = static_cast<int32_t>(env_or("M", 4));
  o.dvi.batch = static_cast<int32_t>(env_or("BATCH", 16));
  o.dvi.kl_updates = static_cast<int32_t>(env_or("NKL", 20));
  o.dvi.target_top_k = 0;
  o.dvi.lr = env_or("LR", 1e-2);
  o.dvi.rl_kl_weight = env_or("RLKL", 0.5);
  o.dvi.pg_weight = env_or("PG", 0.5);
  EarlyExitDrafter d(e.file, *e.backend, o);
  std::mt19937 rng(42);
  std::uniform_int_distribution<int32_t> tok(3, 260);
  std::vector<std::vector<int32_t>> ps;
  for (int p = 0; p < prompts; ++p) {
    std::vector<int32_t> prompt(8);
    for (auto& t : prompt) t = tok(rng);
    ps.push_back(prompt);
  }
  const int reps = static_cast<int>(env_or("REP", 1));
  for (int rep = 0; rep < reps; ++rep)
    for (const auto& prompt : ps) {
      auto res = e.sd(d, prompt, tokens, k, 1);
      if (rep == 0 && std::getenv("SHOW")) {
        for (int32_t x : res.gen.tokens) std::cout << x << " ";
        std::cout << "\n";
      }
    }
  RunResult r;
  r.rounds = d.rounds();
  if (d.trainer()) r.stats = d.trainer()->stats();
  return r;
}

TEST(EarlyExitLearning, Explore) {
  TempDir tmp;
  test::TinyModelSpec t = test::tiny_spec(Arch::Llama, DType::F32);
  t.n_layers = static_cast<int64_t>(env_or("NL", 4));
  t.head_sharpness = static_cast<float>(env_or("SHARP", 1));
  Engine e(test::write_tiny_gguf(t, tmp.file("t.gguf")));
  {
    const SeqId s = e.kv->create();
    const std::vector<int32_t> pr{5, 77, 258, 1, 140, 33, 200, 9, 101};
    auto fr = e.model->forward(Batch::sequence(s, pr, 0, true), *e.kv);
    e.kv->release(s);
    for (size_t t = 0; t < pr.size(); ++t) {
      const float* l = fr.logits_row(t);
      std::vector<double> p(l, l + fr.vocab);
      double m = *std::max_element(p.begin(), p.end()), z = 0;
      for (double& x : p) z += x = std::exp(x - m);
      std::sort(p.begin(), p.end(), std::greater<double>());
      std::cout << "pmax " << p[0] / z << " p2 " << p[1] / z << "\n";
    }
  }
  const int64_t L = static_cast<int64_t>(env_or("L", 1));
  const int prompts = static_cast<int>(env_or("P", 16));
  const int tokens = static_cast<int>(env_or("T", 64));
  for (bool learn : {false, true}) {
    const auto r = run(e, L, learn, prompts, tokens, 4);
    const int64_t n = static_cast<int64_t>(r.rounds.size());
    const auto first = acceptance_over(r.rounds, 0, n / 4);
    const auto last = acceptance_over(r.rounds, n - n / 4, n);
    std::cout << (learn ? "learn" : "plain") << " rounds " << n << " first " << first.rate()
              << " last " << last.rate() << " updates " << r.stats.updates << " train_s "
              << r.stats.train_s << "\n";
    std::cout << format_acceptance_curve(acceptance_windows(r.rounds, n / 8 + 1));
  }
}

}  // namespace
}  // namespace ssd
