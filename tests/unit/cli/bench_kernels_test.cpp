// `ssd bench-kernels` end to end on a tiny model the test writes, with small sizes so it runs in
// a few seconds: exit 0, the JSON has every documented field, every figure is positive with
// min <= median <= max, ratios are in plausible ranges, the markdown table is written, and bad
// lists are rejected with one line naming the flag. The repeated decode runs report one tok/s
// and one context-switch rate per run and their coefficient of variation (checked against its
// definition on made-up samples).
//
// Ranges: the tiny model's weights fit in cache, so its "roofline ratio" (bytes per token x
// tok/s over DRAM bandwidth) may exceed 1; we only require (0, 100). A forward over n <= 4
// tokens does at most n times the work of one plus the same fixed costs, so its ratio to one
// token lies in (1, n] on a quiet machine; a median of 5 samples of 10 forwards each on a loaded
// one (ctest runs tests in parallel) stays within (0.3, 6n), which still catches a ratio
// inverted or taken between different units (seconds vs milliseconds).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "launch/cli/bench_kernels_measure.h"
#include "runtime/backend/cpu/cpu_backend.h"
#include "runtime/core/error.h"
#include "runtime/core/huge_page_arena.h"
#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tiny_model.h"

namespace ssd {
namespace {

using test::run_command;
using test::shell_quote;
using testing::HasSubstr;

void expect_stat(const nlohmann::json& s, const std::string& what) {
  ASSERT_TRUE(s.contains("median") && s.contains("min") && s.contains("max")) << what;
  const double lo = s["min"], mid = s["median"], hi = s["max"];
  EXPECT_GT(lo, 0.0) << what;
  EXPECT_LE(lo, mid) << what;
  EXPECT_LE(mid, hi) << what;
  EXPECT_GE(s["samples"].get<int>(), 1) << what;
}

TEST(BenchKernels, TinyModelWritesSaneJsonAndMarkdown) {
  test::TempDir tmp;
  const std::string model =
      test::write_tiny_gguf(test::tiny_spec(Arch::Llama, DType::Q4_1), tmp.file("tiny.gguf"));
  const std::string json = tmp.file("bk.json"), md = tmp.file("bk.md");
  const auto r = run_command(shell_quote(test::project_binary("ssd")) + " bench-kernels -m " +
                             shell_quote(model) +
                             " --threads-list 1,2 --context 16 --prefill 32 --blocks 2,4"
                             " --repeats 5 --calls 10 --prefill-repeats 1 --bw-mib 4"
                             " --decode-runs 3 --decode-run-tokens 8 --json " +
                             shell_quote(json) + " --markdown " + shell_quote(md));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("verify cost ratio, n = 4"));

  std::ifstream in(json);
  const auto j = nlohmann::json::parse(in);
  for (const char* key : {"model", "weight_type", "weight_bytes_per_token", "threads", "cpu_flags",
                          "kernels_isa", "topology", "transparent_huge_pages", "commit", "build",
                          "results", "targets"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_EQ(j["transparent_huge_pages"], thp_mode());
  EXPECT_EQ(j["weight_type"], "Q4_1");
  const auto bytes = j["weight_bytes_per_token"].get<uint64_t>();
  EXPECT_GT(bytes, 0u);
  EXPECT_LE(bytes, std::filesystem::file_size(model));
  EXPECT_FALSE(j["commit"].get<std::string>().empty());
  ASSERT_EQ(j["results"].size(), 2u);
  for (const auto& t : j["results"]) {
    const std::string at = "threads " + std::to_string(t["threads"].get<int>());
    expect_stat(t["read_bandwidth_gbps"], at + " bandwidth");
    EXPECT_LT(t["read_bandwidth_gbps"]["median"].get<double>(), 10000.0) << at;
    expect_stat(t["decode_tokens_per_s"], at + " decode");
    expect_stat(t["roofline_ratio"], at + " roofline");
    EXPECT_LT(t["roofline_ratio"]["median"].get<double>(), 100.0) << at;
    expect_stat(t["prefill_tokens_per_s"], at + " prefill");
    EXPECT_GT(t["prefill_vs_decode"].get<double>(), 0.0) << at;
    ASSERT_EQ(t["verify"].size(), 2u) << at;
    for (const auto& v : t["verify"]) {
      const int n = v["n"];
      expect_stat(v["seconds"], at + " verify seconds");
      // Timing ratios on a tiny model under a loaded ctest (mpirun tests oversubscribe the
      // cores) can be anything positive: only the field's sanity is a test, speed is the bench's.
      const double ratio = v["ratio"]["median"];
      EXPECT_GT(ratio, 0.0) << at << " n " << n;
      EXPECT_TRUE(std::isfinite(ratio)) << at << " n " << n;
    }
  }
  for (const auto& t : j["results"]) {
    const auto& runs = t["decode_runs"];
    ASSERT_EQ(runs["tokens_per_s"].size(), 3u);
    ASSERT_EQ(runs["context_switches_per_s"].size(), 3u);
    for (const auto& v : runs["tokens_per_s"]) EXPECT_GT(v.get<double>(), 0.0);
    for (const auto& v : runs["context_switches_per_s"]) EXPECT_GE(v.get<double>(), 0.0);
    std::vector<double> tps = runs["tokens_per_s"];
    EXPECT_NEAR(runs["coefficient_of_variation"].get<double>(), coefficient_of_variation(tps),
                1e-12);
    expect_stat(runs["tokens_per_s_stat"], "decode runs");
  }
  // Per thread count: roofline >= 0.7, verify n = 4 <= 1.5, prefill >= 10x decode (no n = 8
  // here), decode run-to-run CV <= 10%.
  EXPECT_EQ(j["targets"].size(), 8u);
  for (const auto& t : j["targets"]) EXPECT_TRUE(t["met"].is_boolean());

  std::ifstream mdin(md);
  const std::string text((std::istreambuf_iterator<char>(mdin)), std::istreambuf_iterator<char>());
  EXPECT_THAT(text, HasSubstr("| decode roofline ratio | 2 |"));
  EXPECT_THAT(text, HasSubstr(j["commit"].get<std::string>()));
}

// A decode batch whose sequences have their own caches (the calibration's, as a real batch's)
// takes cache pages for every sequence's context and gives them back: a cache with room for one
// such batch serves three in a row, and one with room only for forks of a shared prefix refuses
// it while the forks fit.
TEST(BenchKernels, DecodeBatchWithOwnCachesTakesAndReturnsItsPages) {
  test::TempDir tmp;
  const ModelFile file = ModelFile::open(
      test::write_tiny_gguf(test::tiny_spec(Arch::Llama, DType::Q4_1), tmp.file("tiny.gguf")));
  const int64_t context = 32;
  ForwardTimer roomy(file, make_cpu_backend(CpuBackendOptions{1, {}, 0}), context,
                     (context + 32) * 4, 1);
  for (int i = 0; i < 3; ++i) EXPECT_GT(roomy.decode_batch_seconds(4, 1, 1, true).median, 0) << i;
  ForwardTimer tight(file, make_cpu_backend(CpuBackendOptions{1, {}, 0}), context, 16, 1);
  EXPECT_GT(tight.decode_batch_seconds(4, 1, 1, false).median, 0);
  EXPECT_THROW(tight.decode_batch_seconds(4, 1, 1, true), Error);
}

TEST(BenchKernels, CoefficientOfVariationIsTheRelativeSpread) {
  EXPECT_EQ(coefficient_of_variation({}), 0.0);
  EXPECT_EQ(coefficient_of_variation({5.0}), 0.0);
  EXPECT_DOUBLE_EQ(coefficient_of_variation({4.0, 4.0, 4.0}), 0.0);
  EXPECT_DOUBLE_EQ(coefficient_of_variation({1.0, 3.0}), 0.5);  // mean 2, deviation 1
  // The eight 256-token runs that motivated the figure: 151 131 282 111 153 216 109 100 tok/s.
  EXPECT_NEAR(coefficient_of_variation({151, 131, 282, 111, 153, 216, 109, 100}), 0.375, 0.001);
}

TEST(BenchKernels, RejectsBadLists) {
  test::TempDir tmp;
  const std::string model =
      test::write_tiny_gguf(test::tiny_spec(Arch::Llama, DType::F32), tmp.file("tiny.gguf"));
  const std::string base =
      shell_quote(test::project_binary("ssd")) + " bench-kernels -m " + shell_quote(model);
  auto r = run_command(base + " --threads-list 1,0");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("--threads-list"));
  r = run_command(base + " --blocks 2,x");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("--blocks"));
  r = run_command(base + " --context 100000");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("context"));
}

}  // namespace
}  // namespace ssd
