// `ssd simulate` end to end: a table per mode, JSON, a recorded trace that replays to the same
// counts, and clear errors with a non-zero exit for impossible configurations.
#include <gtest/gtest.h>

#include <algorithm>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"
#include "topology/sim/outcome_trace.h"

namespace ssd {
namespace {

using test::run_command;

std::string ssd() { return test::project_binary("ssd") + " simulate "; }

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

TEST(SimCommand, RecordsAndReplaysATrace) {
  test::TempDir d;
  auto r = run_command(ssd() + "--tp 4 --batch 2 --tokens 40 --mode sd,ssd --record-trace " +
                       d.file("t.jsonl") + " --json " + d.file("a.json") + " --trace-json " +
                       d.file("tl.json"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("| 2 | ssd |"), std::string::npos) << r.out;
  const nlohmann::json a = read_json(d.file("a.json"));
  ASSERT_EQ(a["results"].size(), 2u);
  const nlohmann::json& ssd_a = a["results"][1];
  EXPECT_GT(ssd_a["tokens_per_s"].get<double>(), 0);
  r = run_command(ssd() + "--tp 4 --mode ssd --outcome-trace " + d.file("t.jsonl") + " --json " +
                  d.file("b.json"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json b = read_json(d.file("b.json"));
  const nlohmann::json& ssd_b = b["results"][0];
  EXPECT_EQ(ssd_b["rounds"], ssd_a["rounds"]);
  EXPECT_EQ(ssd_b["hits"], ssd_a["hits"]);
  EXPECT_EQ(ssd_b["mean_acceptance_length"], ssd_a["mean_acceptance_length"]);
  EXPECT_EQ(ssd_b["tokens_per_s"], ssd_a["tokens_per_s"]);  // same outcomes, same cluster
  const nlohmann::json tl = read_json(d.file("tl.json"));
  EXPECT_GT(tl["traceEvents"].size(), 10u);
}

// The default model with the committed Domino and the n-gram drafter (SSD_MODEL; skipped
// visibly without it): the profile carries a fit per drafter, keyed as --drafter names it, and
// the verifier's host cost, Domino's pre-speculation calls timed; a simulation with that profile prices Domino's rounds with its fit.
TEST(SimCommand, CalibratesDraftersIntoTheProfile) {
  const char* model = std::getenv("SSD_MODEL");
  const char* src = std::getenv("SSD_SOURCE_DIR");
  if (!model || !src || !std::filesystem::exists(model)) GTEST_SKIP() << "set SSD_MODEL";
  test::TempDir d;
  const std::string domino = std::string(src) + "/models/smollm2-domino/domino.safetensors";
  auto r = run_command(ssd() + "--calibrate --calibrate-model " + model +
                       " --threads 1 --calibrate-rows 3 --calibrate-k 2,4 --calibrate-batch 1,2 "
                       "--calibrate-tokens 8 --calibrate-drafters ngram,domino:" + domino +
                       " --out " + d.file("p.json"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("simulated as --drafter smollm2-domino"), std::string::npos) << r.out;
  const nlohmann::json j = read_json(d.file("p.json"));
  const auto& fits = j.at("drafter_fits");
  ASSERT_TRUE(fits.contains("ngram") && fits.contains("smollm2-domino")) << fits.dump();
  EXPECT_GT(fits["ngram"]["lookup_s"].get<double>() + fits["ngram"]["call_s"].get<double>(), 0);
  EXPECT_GT(fits["smollm2-domino"]["peak_flops"].get<double>(), 0);
  // 4 SD runs (k 2, 4 x batch 1, 2) and, with synthetic target features, 4 branch batches.
  const auto& runs = j.at("drafter_measurements").at("smollm2-domino").at("runs");
  EXPECT_EQ(runs.size(), 8u);
  EXPECT_EQ(std::count_if(runs.begin(), runs.end(),
                          [](const nlohmann::json& r) { return r.value("branches", 0) > 0; }),
            4);
  EXPECT_GE(j.at("verify_host_s").get<double>(), 0);
  EXPECT_GE(j.at("verify_host_row_s").get<double>(), 0);
  // The fitted profile against the same profile without the Domino fit: different SD times.
  nlohmann::json bare = j;
  bare["drafter_fits"].erase("smollm2-domino");
  {
    std::ofstream o(d.file("bare.json"));
    o << bare.dump();
  }
  auto sd_seconds = [&](const std::string& prof) {
    const auto s = run_command(ssd() + "--target smollm2-135m --drafter smollm2-domino "
                               "--colocated --mode sd --tokens 32 --device-profile " + prof +
                               " --json " + d.file("s.json"));
    EXPECT_EQ(s.exit_code, 0) << s.err;
    return read_json(d.file("s.json"))["results"][0]["seconds"].get<double>();
  };
  EXPECT_NE(sd_seconds(d.file("p.json")), sd_seconds(d.file("bare.json")));
}

TEST(SimCommand, ImpossibleConfigsExitNonZeroNamingTheProblem) {
  struct Case {
    std::string flags, says;
  };
  for (const Case& c : {Case{"--tp 3", "TP degree 3 does not divide"},
                        Case{"--target-device h200", "unknown device preset 'h200'"},
                        Case{"--target nope-7b", "unknown model preset 'nope-7b'"},
                        Case{"--tp-link warp", "unknown link preset 'warp'"},
                        Case{"--tp 1", "do not fit"},
                        Case{"--tp 4 --colocated --mode ssd", "ssd needs the drafter on its own"},
                        Case{"--tp 4 --batch 0", "--batch"},
                        Case{"--calibrate --calibrate-model /nonexistent.gguf --out x.json "
                             "--calibrate-drafters early-exit:3",
                             "cannot calibrate 'early-exit:3'"},
                        Case{"--calibrate --calibrate-model /nonexistent.gguf --out x.json "
                             "--calibrate-drafters ngram --calibrate-k 0",
                             "--calibrate-k: 0 must be an integer in 1..32"}}) {
    const auto r = run_command(ssd() + c.flags);
    EXPECT_EQ(r.exit_code, 1) << c.flags;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << c.flags << ": " << r.err;
  }
  test::TempDir d;
  {
    std::ofstream o(d.file("zero.json"));
    o << R"({"name":"z","mem_bw_Bps":0,"overhead_s":0,"peak_flops":{"bf16":1e12}})";
  }
  const auto r = run_command(ssd() + "--device-profile " + d.file("zero.json"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("memory bandwidth must be > 0"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace ssd
