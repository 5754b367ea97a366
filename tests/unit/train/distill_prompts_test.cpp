// Prompt files (runtime/train/prompt_set.h) and the project's distillation prompt sets
// (perf/prompts/distill-{train,heldout}.txt): the parser's format, and the split the trained
// drafter's figures depend on: the held-out prompts never appear in the training file (compared
// case- and whitespace-insensitively), neither file repeats a prompt, and both hold the intended
// mix of kinds at the intended sizes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <set>

#include "runtime/core/error.h"
#include "runtime/train/prompt_set.h"
#include "tests/support/temp_dir.h"

namespace ssd {
namespace {

TEST(PromptSet, ParsesCommentsEscapesAndLineEnds) {
  const auto p = parse_prompt_lines("# comment\nfirst\n\nsecond\\nline\r\nkeep \\t and \\\\n?\n"
                                    "  # not a comment\nlast");
  ASSERT_EQ(p.size(), 5u);
  EXPECT_EQ(p[0], "first");
  EXPECT_EQ(p[1], "second\nline");  // "\n" escape; the CR of a CRLF file dropped
  EXPECT_EQ(p[2], "keep \\t and \\\n?");  // other backslashes kept as they are
  EXPECT_EQ(p[3], "  # not a comment");    // only a '#' in column 0 starts a comment
  EXPECT_EQ(p[4], "last");                 // no final newline needed
  EXPECT_TRUE(parse_prompt_lines("# only comments\n\n").empty());
}

TEST(PromptSet, ReadsFilesAndRefusesMissingOrEmptyOnes) {
  test::TempDir tmp;
  std::ofstream(tmp.file("p.txt")) << "# x\na\nb\nc\n";
  EXPECT_EQ(read_prompt_file(tmp.file("p.txt")), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(read_prompt_file(tmp.file("p.txt"), 2), (std::vector<std::string>{"a", "b"}));
  std::ofstream(tmp.file("empty.txt")) << "# nothing\n\n";
  try {
    read_prompt_file(tmp.file("empty.txt"));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("has no prompts"), std::string::npos) << e.what();
  }
  EXPECT_THROW(read_prompt_file(tmp.file("missing.txt")), Error);
  std::ofstream(tmp.file("q.txt")) << "d\n";
  const std::string both = tmp.file("p.txt") + "," + tmp.file("q.txt");
  EXPECT_EQ(read_prompt_files(both), (std::vector<std::string>{"a", "b", "c", "d"}));
  EXPECT_EQ(read_prompt_files(both, 2), (std::vector<std::string>{"a", "b"}));
  EXPECT_THROW(read_prompt_files(tmp.file("p.txt") + ","), Error);  // an empty entry
  EXPECT_THROW(read_prompt_files(both + "," + tmp.file("missing.txt")), Error);
  EXPECT_THROW(read_prompt_file(tmp.path()), Error);  // a directory
}

size_t count_containing(const std::vector<std::string>& ps, const std::string& word) {
  return static_cast<size_t>(std::count_if(ps.begin(), ps.end(), [&](const std::string& p) {
    return p.find(word) != std::string::npos;
  }));
}

TEST(DistillPrompts, HeldOutSplitIsDisjointFromTrainingAndVaried) {
  const char* src = std::getenv("SSD_SOURCE_DIR");
  if (src == nullptr) GTEST_SKIP() << "SSD_SOURCE_DIR unset (run through ctest)";
  const std::string dir = std::string(src) + "/perf/prompts/";
  const auto train = read_prompt_file(dir + "distill-train.txt");
  const auto held = read_prompt_file(dir + "distill-heldout.txt");
  const auto synth = read_prompt_file(dir + "distill-synth.txt");  // ssd synth-prompts' output

  std::set<std::string> seen_train, seen_held;
  for (const auto& p : train)
    EXPECT_TRUE(seen_train.insert(prompt_key(p)).second) << "repeated in train: " << p;
  for (const auto& p : held) {
    EXPECT_TRUE(seen_held.insert(prompt_key(p)).second) << "repeated in held-out: " << p;
    EXPECT_EQ(seen_train.count(prompt_key(p)), 0u) << "held-out prompt also in train: " << p;
  }
  std::set<std::string> seen_synth;
  for (const auto& p : synth) {
    EXPECT_TRUE(seen_synth.insert(prompt_key(p)).second) << "repeated in synth: " << p;
    EXPECT_EQ(seen_held.count(prompt_key(p)), 0u) << "held-out prompt also in synth: " << p;
  }
  EXPECT_GE(synth.size(), 3000u);
  // About 400 prompts in all, about 60 of them held out.
  EXPECT_GE(train.size(), 300u);
  EXPECT_GE(held.size(), 50u);
  EXPECT_LE(held.size(), train.size() / 4);
  // The mix (both splits): code in several languages, math, JSON, stories, how-tos, comparisons.
  for (const auto* ps : {&train, &held}) {
    for (const char* w : {"Python", "JavaScript", "SQL", "Rust", "JSON", "What is the difference",
                          "Write a short", "How do I", "List ", "Compare", "Solve", "Summarize"})
      EXPECT_GE(count_containing(*ps, w), 1u) << "no prompt with '" << w << "'";
    EXPECT_GE(count_containing(*ps, "\n"), 1u) << "no multi-line prompt";
  }
}

}  // namespace
}  // namespace ssd
