// `ssd synth-prompts` as a user meets it, on a tiny model the test writes: a run writes a prompt
// file that the prompt-file reader gives back (the '#' header naming the flags, exactly --count
// prompts, none of the --exclude file's), the same flags give the same file, and each refusal
// (an existing output without --force, temperature 0, an unreadable --exclude file) is one
// clear line, a non-zero exit and no output written. Needs the built `ssd` binary (ctest sets
// SSD_BIN_DIR); skips visibly without it.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "runtime/train/prompt_set.h"
#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tiny_model.h"

namespace ssd {
namespace {

using test::run_command;
using test::shell_quote;

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class SynthPromptsCli : public testing::Test {
 protected:
  void SetUp() override {
    bin_ = test::project_binary("ssd");
    if (!std::filesystem::exists(bin_)) GTEST_SKIP() << "ssd binary not built: " << bin_;
    model_ = test::write_tiny_gguf(test::tiny_spec(Arch::Llama, DType::Q8_0), tmp_.file("m.gguf"));
  }
  test::CommandResult synth(const std::string& flags) {
    // Random tiny weights end a turn (EOS) rarely: a long budget and few prompts.
    return run_command(shell_quote(bin_) + " synth-prompts -m " + shell_quote(model_) +
                       " -t 1 --max-tokens 200 --min-words 1 --batch 2 " + flags);
  }
  test::TempDir tmp_;
  std::string bin_, model_;
};

TEST_F(SynthPromptsCli, WritesAReadablePromptFileReproducibly) {
  const std::string a = tmp_.file("sub/a.txt"), b = tmp_.file("b.txt");
  auto r = synth("--count 4 --seed 3 -o " + shell_quote(a));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("synth-prompts: wrote"), std::string::npos) << r.err;
  const std::vector<std::string> got = read_prompt_file(a);
  EXPECT_EQ(got.size(), 4u);
  const std::string text = slurp(a);
  EXPECT_EQ(text.rfind("# Written by `ssd synth-prompts`", 0), 0u) << text;
  EXPECT_NE(text.find("--count 4"), std::string::npos);
  EXPECT_NE(text.find("--seed 3"), std::string::npos);

  r = synth("--count 4 --seed 3 -o " + shell_quote(b));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(slurp(b), text);  // same flags, same file

  // Excluding what the first run wrote: a run with the same seed writes none of it again.
  r = synth("--count 2 --seed 3 --force --exclude " + shell_quote(a) + " -o " + shell_quote(b));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::set<std::string> first;
  for (const auto& p : got) first.insert(prompt_key(p));
  for (const auto& p : read_prompt_file(b)) EXPECT_EQ(first.count(prompt_key(p)), 0u) << p;
  EXPECT_NE(r.err.find(" excluded"), std::string::npos) << r.err;
}

TEST_F(SynthPromptsCli, RefusesBadInputWithOneLine) {
  const std::string out = tmp_.file("p.txt");
  std::ofstream(tmp_.file("exists.txt")) << "keep me\n";
  struct Case {
    std::string flags, message;
  };
  const Case cases[] = {
      {"-o " + shell_quote(tmp_.file("exists.txt")), "exists; pass --force"},
      {"--temp 0 -o " + shell_quote(out), "--temp"},
      {"--exclude " + shell_quote(tmp_.file("missing.txt")) + " -o " + shell_quote(out),
       "cannot be read"},
      {"--count 0 -o " + shell_quote(out), "--count"},
      {"--ctx-size 256 -o " + shell_quote(out), "lower --batch or --max-tokens"},  // 2 x 206 > 256
  };
  for (const Case& c : cases) {
    auto r = synth(c.flags);
    EXPECT_NE(r.exit_code, 0) << c.flags;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << c.flags << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_FALSE(std::filesystem::exists(out)) << c.flags;
  }
  EXPECT_EQ(slurp(tmp_.file("exists.txt")), "keep me\n");
}

}  // namespace
}  // namespace ssd
