// The ssd executable as a user meets it, on a tiny model the test writes: help lists every flag
// with its default, every kind of bad input ends in one clear line and a non-zero exit, a run
// writes the documented stats JSON, and a seed reproduces a sampled run bit for bit at 1 and 2
// threads.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tiny_model.h"

namespace ssd {
namespace {

using test::run_command;
using test::shell_quote;
using testing::HasSubstr;

std::string ssd_bin() { return shell_quote(test::project_binary("ssd")); }

class Cli : public testing::Test {
 protected:
  void SetUp() override {
    model_ = test::write_tiny_gguf(test::tiny_spec(Arch::Llama, DType::Q8_0), tmp_.file("tiny.gguf"));
  }
  test::CommandResult generate(const std::string& flags) {
    return run_command(ssd_bin() + " generate -m " + shell_quote(model_) + " " + flags);
  }
  nlohmann::json stats(const std::string& flags) {
    const std::string path = tmp_.file("stats.json");
    auto r = generate(flags + " --stats-json " + shell_quote(path));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::ifstream in(path);
    return nlohmann::json::parse(in);
  }
  test::TempDir tmp_;
  std::string model_;
};

TEST_F(Cli, HelpListsEveryFlagWithDefault) {
  auto top = run_command(ssd_bin() + " --help");
  EXPECT_EQ(top.exit_code, 0);
  EXPECT_THAT(top.out, HasSubstr("generate"));
  auto r = run_command(ssd_bin() + " generate --help");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  for (std::string flag : {"model", "prompt", "prompt-file", "n", "temp", "top-k", "top-p", "min-p",
                           "seed", "chat", "system", "threads", "ctx-size", "ignore-eos", "quiet",
                           "stats-json"}) {
    const bool listed = r.out.find("--" + flag + " ") != std::string::npos ||
                        r.out.find("--[no-]" + flag + " ") != std::string::npos;
    EXPECT_TRUE(listed) << flag << " missing from\n" << r.out;
  }
  EXPECT_THAT(r.out, HasSubstr("128"));  // the default of -n
}

// A run that fails on the leader still writes --stats-json, saying it failed and why (the
// failure's one line on stderr is unchanged, and the exit is non-zero).
TEST_F(Cli, FailedRunWritesStatsWithStatusAndCause) {
  const std::string path = tmp_.file("failed.json");
  auto r = generate("-p hi --ctx-size 4 -n 8 --stats-json " + shell_quote(path));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("context"));
  std::ifstream in(path);
  ASSERT_TRUE(in.good()) << "no stats file after a failed run";
  const nlohmann::json j = nlohmann::json::parse(in);
  EXPECT_EQ(j.at("status"), "failed");
  EXPECT_THAT(j.at("cause").get<std::string>(), HasSubstr("context"));
  EXPECT_EQ(j.at("output_token_ids").size(), 0u);
  EXPECT_EQ(j.at("model"), model_);
}

TEST_F(Cli, GeneratesAndWritesStats) {
  auto j = stats("-p 'the cat' -n 12 --ignore-eos -q");
  EXPECT_EQ(j.at("status"), "ok");
  for (const char* key : {"mode", "tokens_generated", "prefill_tokens_per_s", "decode_tokens_per_s",
                          "output_token_ids", "output_text", "commit", "threads"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_EQ(j["mode"], "ar");
  EXPECT_EQ(j["tokens_generated"], 12);
  EXPECT_EQ(j["output_token_ids"].size(), 12u);
  EXPECT_GT(j["decode_tokens_per_s"].get<double>(), 0.0);
}

// --k auto (the default) reports its chosen lengths: one count per round, k = 0..--k-max.
TEST_F(Cli, KAutoWritesTheChosenLengthHistogram) {
  const nlohmann::json j = stats("-p 'one two one two one two' -n 16 --ignore-eos --mode sd "
                                 "--drafter ngram --k-max 5 --quiet");
  EXPECT_EQ(j["k"], 5);
  EXPECT_EQ(j["k_auto"], true);
  ASSERT_EQ(j["chosen_k_histogram"].size(), 6u);
  int64_t chosen = 0;
  for (const auto& c : j["chosen_k_histogram"]) chosen += c.get<int64_t>();
  EXPECT_EQ(chosen, j["rounds"].get<int64_t>());
  const nlohmann::json fixed = stats("-p hi -n 8 --mode sd --drafter ngram --k 3 --quiet");
  EXPECT_EQ(fixed["k_auto"], false);
  EXPECT_EQ(fixed["chosen_k_histogram"].size(), 4u);
}

TEST_F(Cli, SeedReproducesSampledRunsAtOneAndTwoThreads) {
  const std::string flags = "-p 'hello there' -n 24 --ignore-eos -q --temp 1.0 --top-k 50 --seed 1234";
  auto a = stats(flags + " -t 1")["output_token_ids"];
  auto b = stats(flags + " -t 2")["output_token_ids"];
  auto c = stats(flags + " -t 2")["output_token_ids"];
  EXPECT_EQ(a, b);
  EXPECT_EQ(b, c);
  auto other = stats("-p 'hello there' -n 24 --ignore-eos -q --temp 1.0 --top-k 50 --seed 99 -t 1");
  EXPECT_NE(other["output_token_ids"], a) << "a different seed should change a 24-token sample";
}

struct BadCase {
  const char* flags;
  const char* message;
};

TEST_F(Cli, BadInputIsOneClearLineAndNonZeroExit) {
  const BadCase cases[] = {
      {"-p hi --tmep 0.5", "--temp"},                // unknown flag, suggestion names the real one
      {"-p hi --temp abc", "abc"},                   // not a number
      {"-p hi --temp -1", "--temp"},                 // out of range
      {"-p hi -n", "-n"},                            // missing value
      {"-n 3", "--prompt"},                          // no prompt
      {"-p hi --prompt-file /nonexistent/p.txt", "/nonexistent/p.txt"},
      {"-p hi --ctx-size 4 -n 8", "context"},        // prompt + n exceed the context
      {"-p hi --ctx-size 100000", "context length"}, // beyond the model's context
      {"-p hi --threads 0", "--threads"},
      {"-p hi --system x", "--chat"},
      {"-p hi --backup medusa", "--backup"},         // not ngram or suffix
      {"-p hi --suffix-min-prob 0", "--suffix-min-prob"},
      {"-p hi --mode sd --k banana", "--k 'banana'"},  // neither auto nor a length
      {"-p hi --mode sd --k 0", "--k '0'"},
      {"-p hi --mode sd --k-max 40", "--k-max"},
  };
  for (const auto& c : cases) {
    auto r = generate(c.flags);
    EXPECT_NE(r.exit_code, 0) << c.flags;
    EXPECT_THAT(r.err, HasSubstr(c.message)) << c.flags << "\n" << r.err;
    EXPECT_LE(std::count(r.err.begin(), r.err.end(), '\n'), 2) << c.flags << "\n" << r.err;
  }
  auto unknown_cmd = run_command(ssd_bin() + " generat");
  EXPECT_NE(unknown_cmd.exit_code, 0);
  EXPECT_THAT(unknown_cmd.err, HasSubstr("generat"));
}

TEST_F(Cli, MissingOrMalformedModelFileIsNamed) {
  auto missing = run_command(ssd_bin() + " generate -m /nonexistent/model.gguf -p hi");
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_THAT(missing.err, HasSubstr("/nonexistent/model.gguf"));

  // Truncate the model in the middle of its data: the loader must name the file and a tensor.
  std::ifstream in(model_, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  const std::string cut = tmp_.file("cut.gguf");
  std::ofstream(cut, std::ios::binary).write(bytes.data(), bytes.size() / 2);
  auto r = run_command(ssd_bin() + " generate -m " + shell_quote(cut) + " -p hi");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("cut.gguf"));
  EXPECT_THAT(r.err, HasSubstr("tensor"));
}

TEST_F(Cli, RunsAHuggingFaceCheckpointDirectory) {
  test::TempDir hf;
  test::write_tiny_safetensors(test::tiny_spec(Arch::Qwen2, DType::BF16), hf.path(), 2);
  const std::string path = tmp_.file("hf.json");
  auto r = run_command(ssd_bin() + " generate -m " + shell_quote(hf.path()) +
                       " -p 'the cat' -n 6 --ignore-eos -q --stats-json " + shell_quote(path));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("safetensors"));
  std::ifstream in(path);
  EXPECT_EQ(nlohmann::json::parse(in)["tokens_generated"], 6);
}

TEST_F(Cli, InfoDescribesTheModel) {
  auto r = run_command(ssd_bin() + " info -m " + shell_quote(model_));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("llama"));
  EXPECT_THAT(r.out, HasSubstr("vocab 261"));
  EXPECT_THAT(r.out, HasSubstr("Q8_0"));
}

}  // namespace
}  // namespace ssd
