// `ssd distill` as a user meets it, on a tiny model the test writes: a run writes a dataset the
// reader opens (default layers, one sequence per prompt, the progress and summary lines), and
// every refusal the brief names (an existing output without --force, a missing or empty prompt
// file, a layer outside the model) is one clear line, a non-zero exit, and no output written.
// On the real default model (env SSD_MODEL), each stored response is exactly what
// `ssd generate --chat` prints for that prompt (its output_token_ids), though distill decodes the
// prompts as one batch. Needs the built `ssd` binary (ctest sets SSD_BIN_DIR); skips visibly
// without it.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "runtime/train/distill_dataset.h"
#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tiny_model.h"

namespace ssd {
namespace {

using test::run_command;
using test::shell_quote;

class DistillCli : public testing::Test {
 protected:
  void SetUp() override {
    bin_ = test::project_binary("ssd");
    if (!std::filesystem::exists(bin_)) GTEST_SKIP() << "ssd binary not built: " << bin_;
    model_ = test::write_tiny_gguf(test::tiny_spec(Arch::Llama, DType::Q8_0), tmp_.file("m.gguf"));
    prompts_ = tmp_.file("p.txt");
    std::ofstream(prompts_) << "# three prompts\nthe cat\nhello there\\nfriend\na b c\n";
  }
  test::CommandResult distill(const std::string& flags) {
    return run_command(shell_quote(bin_) + " distill -m " + shell_quote(model_) + " -t 1 " +
                       flags);
  }
  test::TempDir tmp_;
  std::string bin_, model_, prompts_;
};

TEST_F(DistillCli, WritesADatasetAndRefusesToOverwriteIt) {
  const std::string out = tmp_.file("sub/d.bin");  // parent directory created on demand
  auto r = distill("--prompts " + shell_quote(prompts_) + " -o " + shell_quote(out) +
                   " -n 6 --batch 2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("distill: 2/3 sequences"), std::string::npos) << r.err;  // progress
  EXPECT_NE(r.err.find("distill: 3/3 sequences"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("3 sequences |"), std::string::npos) << r.err;           // summary
  const DistillDataset d = DistillDataset::open(out);
  EXPECT_EQ(d.size(), 3u);
  EXPECT_EQ(d.target_layers(), (std::vector<int32_t>{0, 1}));  // 2 layers: 1, 1, 0 -> {0, 1}
  EXPECT_EQ(d.model_digest(), model_file_digest(model_));
  for (size_t i = 0; i < d.size(); ++i) EXPECT_LE(d.length(i) - d.prompt_len(i), 6);

  const auto before = std::filesystem::last_write_time(out);
  r = distill("--prompts " + shell_quote(prompts_) + " -o " + shell_quote(out));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("exists; pass --force"), std::string::npos) << r.err;
  EXPECT_EQ(std::filesystem::last_write_time(out), before);
  r = distill("--prompts " + shell_quote(prompts_) + " -o " + shell_quote(out) +
              " -n 3 --force --layers 1 --no-chat");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(DistillDataset::open(out).target_layers(), (std::vector<int32_t>{1}));
}

TEST_F(DistillCli, RefusesBadInputWithOneLine) {
  const std::string out = tmp_.file("d.bin");
  const std::string empty = tmp_.file("empty.txt");
  std::ofstream(empty) << "# no prompts here\n\n";
  struct Case {
    std::string flags, message;
  };
  const Case cases[] = {
      {"--prompts " + shell_quote(tmp_.file("missing.txt")), "cannot be read"},
      {"--prompts " + shell_quote(empty), "has no prompts"},
      {"--prompts " + shell_quote(prompts_) + " --layers 0,2", "layer 2 is outside the model"},
      {"--prompts " + shell_quote(prompts_) + " --layers 1,x", "'x' is not a layer number"},
  };
  for (const Case& c : cases) {
    auto r = distill(c.flags + " -o " + shell_quote(out));
    EXPECT_EQ(r.exit_code, 1) << c.flags;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << c.flags << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_FALSE(std::filesystem::exists(out)) << c.flags;
    EXPECT_FALSE(std::filesystem::exists(out + ".partial")) << c.flags;
  }
}

TEST(DistillCliRealModel, StoredResponsesEqualSsdGenerateGreedyOutput) {
  const char* model = std::getenv("SSD_MODEL");
  if (model == nullptr || !std::filesystem::exists(model))
    GTEST_SKIP() << "set SSD_MODEL to the default model's GGUF to run this test";
  const std::string bin = test::project_binary("ssd");
  if (!std::filesystem::exists(bin)) GTEST_SKIP() << "ssd binary not built: " << bin;
  test::TempDir tmp;
  // Two held-out-style prompts of different lengths decoded as one batch of 2.
  const std::vector<std::string> prompts = {"Name three colors.",
                                            "Write a Python function that adds two numbers."};
  std::ofstream(tmp.file("p.txt")) << prompts[0] << "\n" << prompts[1] << "\n";
  const std::string out = tmp.file("d.bin");
  const std::string common = " -m " + shell_quote(model) + " -t 2 -n 40";
  auto r = run_command(shell_quote(bin) + " distill" + common + " --prompts " +
                       shell_quote(tmp.file("p.txt")) + " -o " + shell_quote(out) + " --batch 2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const DistillDataset d = DistillDataset::open(out);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d.target_layers(), (std::vector<int32_t>{1, 15, 27}));  // 30 layers
  EXPECT_EQ(d.feature_dim(), 3 * 576);
  for (size_t i = 0; i < prompts.size(); ++i) {
    const std::string stats = tmp.file(fmt::format("g{}.json", i));
    r = run_command(shell_quote(bin) + " generate --chat -q" + common + " -p " +
                    shell_quote(prompts[i]) + " --stats-json " + shell_quote(stats));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto j = nlohmann::json::parse(std::ifstream(stats));
    const auto want = j.at("output_token_ids").get<std::vector<int32_t>>();
    const DistillSequence s = d.read(i);
    EXPECT_EQ(std::vector<int32_t>(s.tokens.begin() + s.prompt_len, s.tokens.end()), want)
        << "prompt " << i;
  }
}

}  // namespace
}  // namespace ssd
