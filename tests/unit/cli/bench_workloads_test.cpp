// `ssd bench --workloads DIR` and the workload suite:
//   - on a tiny model and two categories (comment lines, "\n" escapes), with AR and SD (n-gram and
//     suffix drafters): one table per category, the summary and the category matrix in the
//     markdown; JSON with every category's rows and the summary, whose token counts are the sums
//     of the categories'; greedy SD equal to AR in every category;
//   - configurations do not share a drafter's memory of earlier requests;
//   - bad input: both or neither of --prompt-file/--workloads, a directory without .txt files,
//     a category file without prompts: one clear message and a non-zero exit;
//   - the suite in perf/workloads: the ten categories, at least 20 prompts each, every prompt
//     short enough to leave the default model's context room for the answer.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "launch/cli/bench_workloads.h"
#include "runtime/core/error.h"
#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tiny_model.h"

namespace ssd {
namespace {

using test::run_command;
using test::shell_quote;
using testing::HasSubstr;

class BenchWorkloads : public testing::Test {
 protected:
  void SetUp() override {
    model_ =
        test::write_tiny_gguf(test::tiny_spec(Arch::Llama, DType::Q8_0), tmp_.file("tiny.gguf"));
    dir_ = tmp_.file("workloads");
    std::filesystem::create_directories(dir_);
    std::ofstream(dir_ + "/beta.txt") << "# a comment\none two three one two three\nfour\\nfive\n";
    std::ofstream(dir_ + "/alpha.txt") << "the cat sat on the mat the cat\n# skip me\nhello\n";
    std::ofstream(dir_ + "/notes.md") << "not a category\n";
  }
  test::CommandResult bench(const std::string& flags) {
    return run_command(shell_quote(test::project_binary("ssd")) + " bench -m " +
                       shell_quote(model_) + " --no-chat -t 1 " + flags);
  }
  test::TempDir tmp_;
  std::string model_, dir_;
};

TEST_F(BenchWorkloads, OneTablePerCategoryAndASummary) {
  const std::string json = tmp_.file("b.json"), md = tmp_.file("b.md");
  auto r = bench("--workloads " + shell_quote(dir_) + " -n 6 --drafters ngram,suffix --k 3" +
                 " --out-json " + shell_quote(json) + " --out-md " + shell_quote(md));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::ifstream mdin(md);
  const std::string text((std::istreambuf_iterator<char>(mdin)), {});
  EXPECT_THAT(text, HasSubstr("4 prompts in 2 categories"));
  const size_t a = text.find("### alpha (2 prompts)"), b = text.find("### beta (2 prompts)");
  const size_t s = text.find("### summary: all categories"), m = text.find("### by category");
  ASSERT_NE(a, std::string::npos) << text;
  ASSERT_NE(b, std::string::npos) << text;
  ASSERT_NE(s, std::string::npos) << text;
  ASSERT_NE(m, std::string::npos) << text;
  EXPECT_TRUE(a < b && b < s && s < m) << "categories in name order, then the summaries";
  EXPECT_THAT(text.substr(m), HasSubstr("| alpha |"));
  EXPECT_THAT(text.substr(m), HasSubstr("sd suffix k=3 MAL"));
  EXPECT_EQ(text.find("notes"), std::string::npos) << "only .txt files are categories";

  std::ifstream in(json);
  const nlohmann::json j = nlohmann::json::parse(in);
  ASSERT_TRUE(j["categories"].contains("alpha"));
  ASSERT_TRUE(j["categories"].contains("beta"));
  ASSERT_EQ(j["summary"].size(), 3u) << "ar, sd ngram, sd suffix";
  for (size_t row = 0; row < 3; ++row) {
    const auto& sum = j["summary"][row];
    const auto& ca = j["categories"]["alpha"][row];
    const auto& cb = j["categories"]["beta"][row];
    EXPECT_EQ(sum["drafter"], ca["drafter"]);
    EXPECT_EQ(sum["greedy_compared"].get<int>(),
              ca["greedy_compared"].get<int>() + cb["greedy_compared"].get<int>());
    EXPECT_EQ(sum["greedy_exact"], sum["greedy_compared"]) << "greedy SD == AR";
  }
  EXPECT_EQ(j["summary"][2]["drafter"], "suffix");
  EXPECT_EQ(j["summary"][2]["greedy_compared"], 4);
  ASSERT_EQ(j["runs"].size(), 12u) << "4 prompts x 3 configurations";
  EXPECT_EQ(j["runs"][0]["category"], "alpha");
}

// Each configuration measures each prompt once with a drafter of its own: a suffix drafter run
// twice at the same k must not find the first configuration's answers to the same prompts in
// its memory of earlier requests (it did when one drafter served every --k), so both runs of a
// prompt accept exactly as many tokens.
TEST_F(BenchWorkloads, ConfigurationsDoNotShareADraftersMemory) {
  const std::string json = tmp_.file("c.json");
  auto r = bench("--workloads " + shell_quote(dir_) + " -n 12 --modes sd --drafters suffix" +
                 " --k 3,3 --out-json " + shell_quote(json));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::ifstream in(json);
  const nlohmann::json runs = nlohmann::json::parse(in)["runs"];
  ASSERT_EQ(runs.size(), 8u) << "4 prompts x 2 configurations";
  for (size_t i = 0; i < runs.size(); i += 2) {
    EXPECT_EQ(runs[i]["prompt_index"], runs[i + 1]["prompt_index"]);
    EXPECT_EQ(runs[i]["accepted_length_histogram"], runs[i + 1]["accepted_length_histogram"])
        << "prompt " << runs[i]["prompt_index"];
  }
}

// --round-times: one line per SD round of every configuration in this process, in the order the
// runs were measured; per run as many lines as it had rounds, whose verify times add up to the
// run's, each round verifying its sequence's row and at most k draft rows.
TEST_F(BenchWorkloads, RoundTimesHoldEveryRoundOfEveryRun) {
  const std::string json = tmp_.file("t.json"), times = tmp_.file("t.jsonl");
  auto r = bench("--workloads " + shell_quote(dir_) + " -n 8 --drafters ngram,suffix --k 3,auto" +
                 " --out-json " + shell_quote(json) + " --round-times " + shell_quote(times));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::ifstream jin(json);
  const nlohmann::json runs = nlohmann::json::parse(jin)["runs"];
  std::vector<nlohmann::json> sd_runs;
  for (const auto& run : runs)
    if (run["mode"] == "sd") sd_runs.push_back(run);
  ASSERT_EQ(sd_runs.size(), 16u) << "4 prompts x 2 drafters x 2 lengths";
  std::ifstream tin(times);
  std::vector<nlohmann::json> lines;
  for (std::string line; std::getline(tin, line);) lines.push_back(nlohmann::json::parse(line));
  size_t at = 0;
  for (const auto& run : sd_runs) {
    SCOPED_TRACE(run["drafter"].get<std::string>() + " k=" + run["k"].dump() + " prompt " +
                 run["prompt_index"].dump());
    const int64_t rounds = run["rounds"].get<int64_t>();
    ASSERT_GT(rounds, 0);
    ASSERT_LE(at + static_cast<size_t>(rounds), lines.size());
    double verify = 0;
    for (int64_t i = 0; i < rounds; ++i) {
      const nlohmann::json& l = lines[at + static_cast<size_t>(i)];
      EXPECT_EQ(l["category"], run["category"]);
      EXPECT_EQ(l["drafter"], run["drafter"]);
      EXPECT_EQ(l["k"], run["k_auto"].get<bool>() ? "auto" : run["k"].dump());
      EXPECT_EQ(l["prompt"], run["prompt_index"]);
      EXPECT_EQ(l["round"].get<int64_t>(), i);
      EXPECT_GE(l["rows"].get<int64_t>(), 1);
      EXPECT_LE(l["rows"].get<int64_t>(), 1 + (run["k_auto"].get<bool>() ? 8 : 3));
      EXPECT_GE(l["draft_s"].get<double>(), 0.0);
      verify += l["verify_s"].get<double>();
    }
    EXPECT_NEAR(verify, run["verify_time_s"].get<double>(), 1e-9);
    at += static_cast<size_t>(rounds);
  }
  EXPECT_EQ(at, lines.size()) << "no lines beyond the SD runs' rounds";

  r = bench("--workloads " + shell_quote(dir_) + " -n 2 --round-times /nonexistent/dir/t.jsonl");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("--round-times: cannot write /nonexistent/dir/t.jsonl")) << r.err;
}

TEST_F(BenchWorkloads, BadInputIsNamed) {
  const std::string empty = tmp_.file("empty");
  std::filesystem::create_directories(empty);
  const std::string hollow = tmp_.file("hollow");
  std::filesystem::create_directories(hollow);
  std::ofstream(hollow + "/only_comments.txt") << "# nothing here\n\n";
  const std::pair<std::string, std::string> cases[] = {
      {"-n 2", "exactly one of --prompt-file"},
      {"-n 2 --workloads " + shell_quote(dir_) + " --prompt-file " +
           shell_quote(dir_ + "/alpha.txt"),
       "exactly one of --prompt-file"},
      {"-n 2 --workloads " + shell_quote(empty), "holds no .txt prompt file"},
      {"-n 2 --workloads " + shell_quote(hollow), "only_comments.txt"},
      {"-n 2 --workloads /nonexistent/dir", "/nonexistent/dir"},
  };
  for (const auto& [flags, message] : cases) {
    auto r = bench(flags);
    EXPECT_NE(r.exit_code, 0) << flags;
    EXPECT_THAT(r.err, HasSubstr(message)) << flags << "\n" << r.err;
  }
}

TEST(WorkloadSuite, TenCategoriesOfAtLeastTwentyShortPrompts) {
  const char* src = std::getenv("SSD_SOURCE_DIR");
  ASSERT_NE(src, nullptr) << "ctest sets SSD_SOURCE_DIR";
  const auto cats = read_workloads(std::filesystem::path(src) / "perf" / "workloads", 0);
  std::vector<std::string> names;
  for (const auto& c : cats) {
    names.push_back(c.name);
    EXPECT_GE(c.prompts.size(), 20u) << c.name;
    for (const auto& p : c.prompts) {
      // ~4 characters a token: 1600 characters is ~400 tokens, far inside the default model's
      // context with 128 tokens to answer.
      EXPECT_LE(p.size(), 1600u) << c.name << ": " << p.substr(0, 60);
      EXPECT_EQ(p.find("\\n"), std::string::npos) << "an unescaped \\n in " << c.name;
    }
  }
  EXPECT_EQ(names, (std::vector<std::string>{"chat", "code", "extraction", "math", "multi_turn",
                                             "qa", "rag", "rewrite", "summarization",
                                             "translation"}));
  EXPECT_THROW(read_workloads("/nonexistent/dir", 0), Error);
}

}  // namespace
}  // namespace ssd
