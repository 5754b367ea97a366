// `ssd train-domino` and `ssd eval-domino` as a user meets them, on a tiny model the test writes:
// distill a dataset, train a few steps (the checkpoint and its .optim sidecar are written, the
// progress and summary lines printed), evaluate it (one table: per-position accuracy, the
// accepted-prefix histogram summing to the block count, offline MAL at every k below the block).
// Refusals are one clear line and a non-zero exit: a dataset with other feature layers than the
// checkpoint's, --target-layers that differ from the dataset's, a --resume of a file that is not a
// checkpoint or without its sidecar, --rows 1. Needs the built `ssd` binary (ctest sets SSD_BIN_DIR); skips visibly
// without it.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>

#include "runtime/drafters/domino/domino_checkpoint.h"
#include "runtime/train/train_checkpoint.h"
#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tiny_model.h"

namespace ssd {
namespace {

using test::run_command;
using test::shell_quote;

class TrainEvalCli : public testing::Test {
 protected:
  void SetUp() override {
    bin_ = test::project_binary("ssd");
    if (!std::filesystem::exists(bin_)) GTEST_SKIP() << "ssd binary not built: " << bin_;
    model_ = test::write_tiny_gguf(test::tiny_spec(Arch::Llama, DType::F32), tmp_.file("m.gguf"));
    const std::string prompts = tmp_.file("p.txt");
    std::ofstream(prompts) << "the cat\nhello there\na b c\none two\n";
    for (const auto& [out, layers] : {std::pair{&data_, "0,1"}, std::pair{&data_l1_, "1"}}) {
      *out = tmp_.file(fmt::format("d{}.bin", layers));
      const auto r = ssd("distill --prompts " + shell_quote(prompts) + " -o " + shell_quote(*out) +
                         " -n 24 --batch 4 -t 1 --no-chat --layers " + layers);
      ASSERT_EQ(r.exit_code, 0) << r.err;
    }
  }
  test::CommandResult ssd(const std::string& args) {
    return run_command(shell_quote(bin_) + " " + args + " -m " + shell_quote(model_));
  }
  test::CommandResult train(const std::string& out, const std::string& flags = "") {
    return ssd("train-domino --data " + shell_quote(data_) + " --out " + shell_quote(out) +
               " --block-size 6 --gru-dim 16 --rank 8 --steps 4 --batch-seqs 2 --anchors 2 "
               "--threads 1 " + flags);
  }
  test::TempDir tmp_;
  std::string bin_, model_, data_, data_l1_;
};

TEST_F(TrainEvalCli, TrainsAndEvaluatesACheckpoint) {
  const std::string ck = tmp_.file("d.safetensors");
  auto r = train(ck, "--context-inject");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(std::filesystem::exists(ck));
  EXPECT_TRUE(std::filesystem::exists(ck + ".optim"));
  EXPECT_NE(r.err.find("step 4/4"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("done: steps 0..4"), std::string::npos) << r.err;

  r = ssd("eval-domino --data " + shell_quote(data_) + " --drafter " + shell_quote(ck) +
          " --stride 2 --threads 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m, std::regex(R"((\d+) sequences, (\d+) blocks of 6 rows, 1 known)")))
      << r.out;
  const int blocks = std::stoi(m[2]);
  EXPECT_GT(blocks, 0);
  // The histogram rows ("position acc acc count") sum to the block count.
  int sum = 0, rows = 0;
  const std::regex row(R"(\n +(\d) +(-|[01]\.\d{3}) +(-|[01]\.\d{3}) +(\d+))");
  for (auto it = std::sregex_iterator(r.out.begin(), r.out.end(), row); it != std::sregex_iterator();
       ++it, ++rows)
    sum += std::stoi((*it)[4]);
  EXPECT_EQ(rows, 6) << r.out;
  EXPECT_EQ(sum, blocks) << r.out;
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(k=1 [12]\.\d{3}  k=3 [1-4]\.\d{3}$)",
                                                  std::regex::multiline)))
      << r.out;

  // A fine-tuning run starts from the checkpoint's weights and config (here lr 0 and no decay,
  // so one step must leave every weight as it was), also with SSD-shaped blocks.
  const std::string tuned = tmp_.file("tuned.safetensors");
  r = ssd("train-domino --data " + shell_quote(data_) + " --out " + shell_quote(tuned) +
          " --init-from " + shell_quote(ck) +
          " --steps 1 --lr 0 --weight-decay 0 --known-max 3 --batch-seqs 2 --anchors 2 --threads 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("config: from --init-from"), std::string::npos) << r.err;
  const DominoConfig cfg = DominoCheckpoint::open(ck).config();
  EXPECT_TRUE(cfg.context_inject);
  const train::ParamLayout layout(cfg);
  EXPECT_EQ(train::load_checkpoint_params(tuned, cfg, layout),
            train::load_checkpoint_params(ck, cfg, layout));
  r = ssd("eval-domino --data " + shell_quote(data_) + " --drafter " + shell_quote(tuned) +
          " --known 3 --threads 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("blocks of 6 rows, 3 known"), std::string::npos) << r.out;
}

TEST_F(TrainEvalCli, RefusesMismatchesWithOneLine) {
  const std::string ck = tmp_.file("d.safetensors");
  ASSERT_EQ(train(ck).exit_code, 0);
  const std::string bare = tmp_.file("bare.safetensors");  // a checkpoint without its sidecar
  std::filesystem::copy_file(ck, bare);
  struct Case {
    test::CommandResult r;
    std::string message;
  };
  const Case cases[] = {
      {ssd("eval-domino --data " + shell_quote(data_l1_) + " --drafter " + shell_quote(ck)),
       "--drafter reads target layers 0,1 but --data holds layers 1"},
      {ssd("eval-domino --data " + shell_quote(data_) + " --drafter " + shell_quote(ck) +
           " --rows 1"),
       "--rows"},
      {train(tmp_.file("e.safetensors"), "--target-layers 1"),
       "--target-layers 1 differ from the dataset's layers 0,1"},
      {train(tmp_.file("e.safetensors"), "--resume " + shell_quote(model_)),
       "--resume: " + model_},
      {train(tmp_.file("e.safetensors"), "--resume " + shell_quote(bare)),
       "--resume: cannot open the optimiser state " + bare + ".optim"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(c.r.exit_code, 1) << c.message << ": " << c.r.err;
    // train-domino prints the model and data lines first; the error itself is one line.
    const size_t at = c.r.err.find("error: ");
    ASSERT_NE(at, std::string::npos) << c.r.err;
    const std::string line = c.r.err.substr(at);
    EXPECT_NE(line.find(c.message), std::string::npos) << c.r.err;
    EXPECT_EQ(std::count(line.begin(), line.end(), '\n'), 1) << c.r.err;
  }
  EXPECT_FALSE(std::filesystem::exists(tmp_.file("e.safetensors")));
}

}  // namespace
}  // namespace ssd
