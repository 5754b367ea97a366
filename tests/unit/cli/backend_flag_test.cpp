// --backend auto|cpu|cuda (actors/roles/backend_choice.h), as resolved in-process and as the
// ssd executable behaves on this machine. Without a GPU (the build machine): --backend cuda is
// one clear line and a non-zero exit, never a crash; auto runs on the CPU (saying so on the
// model line in a CUDA build) and produces the same tokens as --backend cpu. With a GPU the
// cases that need its absence skip, saying so.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "actors/roles/backend_choice.h"
#include "runtime/core/error.h"
#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tiny_model.h"

#if defined(SSD_HAVE_CUDA)
#include "runtime/backend/cuda/cuda_backend.h"
#endif

namespace ssd {
namespace {

using test::run_command;
using test::shell_quote;
using testing::HasSubstr;

bool have_gpu() {
#if defined(SSD_HAVE_CUDA)
  return cuda_device_count() > 0;
#else
  return false;
#endif
}

TEST(BackendChoice, ResolvesOnThisMachine) {
  std::string note = "stale";
  EXPECT_EQ(resolve_backend("cpu", &note), BackendKind::Cpu);
  EXPECT_TRUE(note.empty());
  EXPECT_THROW(resolve_backend("tpu", &note), Error);
  if (have_gpu()) {
    EXPECT_EQ(resolve_backend("auto", &note), BackendKind::Cuda);
    EXPECT_EQ(resolve_backend("cuda", &note), BackendKind::Cuda);
    return;
  }
  EXPECT_EQ(resolve_backend("auto", &note), BackendKind::Cpu);
  EXPECT_EQ(!note.empty(), cuda_backend_built()) << note;
  try {
    resolve_backend("cuda", &note);
    FAIL() << "--backend cuda resolved without a GPU";
  } catch (const Error& e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr("--backend cuda"));
    EXPECT_THAT(std::string(e.what()),
                HasSubstr(cuda_backend_built() ? "no CUDA device" : "built without CUDA"));
  }
}

TEST(BackendChoice, ExecutableRefusesCudaWithoutGpuAndFallsBackOnAuto) {
  if (have_gpu()) GTEST_SKIP() << "a GPU is present: the no-GPU behaviour cannot be checked here";
  test::TempDir tmp;
  const std::string model =
      test::write_tiny_gguf(test::tiny_spec(Arch::Llama, DType::Q8_0), tmp.file("tiny.gguf"));
  const std::string base = shell_quote(test::project_binary("ssd")) + " generate -m " +
                           shell_quote(model) + " -p hello -n 6 --quiet";
  const auto cuda = run_command(base + " --backend cuda");
  EXPECT_NE(cuda.exit_code, 0);
  EXPECT_LT(cuda.exit_code, 128) << "killed by a signal: " << cuda.err;  // not a crash
  EXPECT_THAT(cuda.err, HasSubstr("--backend cuda"));
  EXPECT_LE(std::count(cuda.err.begin(), cuda.err.end(), '\n'), 1) << cuda.err;

  const std::string sj_auto = tmp.file("auto.json"), sj_cpu = tmp.file("cpu.json");
  const auto a = run_command(base + " --backend auto --stats-json " + shell_quote(sj_auto));
  ASSERT_EQ(a.exit_code, 0) << a.err;
  if (cuda_backend_built()) {
    EXPECT_THAT(a.err, HasSubstr("backend cpu (auto: no CUDA device found"));
  }
  const auto c = run_command(base + " --backend cpu --stats-json " + shell_quote(sj_cpu));
  ASSERT_EQ(c.exit_code, 0) << c.err;
  EXPECT_THAT(c.err, HasSubstr("| backend cpu\n"));
  std::ifstream ja(sj_auto), jc(sj_cpu);
  EXPECT_EQ(nlohmann::json::parse(ja)["output_token_ids"],
            nlohmann::json::parse(jc)["output_token_ids"]);
}

}  // namespace
}  // namespace ssd
